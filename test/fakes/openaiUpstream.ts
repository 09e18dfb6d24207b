import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A fake OpenAI-compatible upstream on loopback, speaking the protocol as api.openai.com does:
 * `POST /v1/chat/completions`, Bearer auth, `chat.completion` JSON or SSE `chat.completion.chunk` events
 * ending in `data: [DONE]`, a usage chunk (choices: []) when `stream_options.include_usage`, and errors
 * as `{error:{message,type,param,code}}`. Tests tell it how to misbehave with `behave()`.
 */
export interface FakeBehaviour {
  /** Answer with this status and an OpenAI error body instead of a completion. */
  status?: number;
  /** Reply text (default: "You said: " + the last user message). Streams send one word per chunk. */
  content?: string;
  /** Reply with these tool calls (OpenAI's `tool_calls` objects) instead of text. */
  toolCalls?: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }>;
  /** Pause between stream chunks; 0 yields to the event loop between chunks (setImmediate). */
  chunkDelayMs?: number;
  /** Streams: destroy the connection after this many content chunks. */
  failAfterChunks?: number;
  /** Never answer (the connection stays open until the client gives up). */
  hang?: boolean;
  /** Streams: instead of words, send this many bytes of content in chunks of `floodChunkBytes`. */
  floodBytes?: number;
  floodChunkBytes?: number;
  /** Report no usage at all: no `usage` in a completion, no usage chunk in a stream (some upstreams do this). */
  omitUsage?: boolean;
}

export interface RecordedRequest {
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown>;
}

export interface FakeStats {
  requests: number;
  /** Requests whose client went away before the answer was complete. */
  aborted: number;
  /** Content bytes written by flood streams. */
  floodBytesSent: number;
  /** A flood stream is blocked on `drain`: its reader stopped reading. */
  waitingForDrain: boolean;
}

export interface FakeUpstream {
  /** What an OpenAI client takes as baseURL, e.g. http://127.0.0.1:1234/v1 */
  baseUrl: string;
  apiKey: string;
  requests: RecordedRequest[];
  stats: FakeStats;
  behave(behaviour: FakeBehaviour): void;
  /** Resolves at the next abort (or at once if `count` aborts already happened). */
  waitForAborts(count: number): Promise<void>;
  stop(): Promise<void>;
}

const errorBody = (status: number) => ({
  error: {
    message: status === 401 ? "Incorrect API key provided." : status === 429 ? "Rate limit reached for requests" : `The server had an error (${status}).`,
    type: status === 401 ? "invalid_request_error" : status === 429 ? "requests" : status >= 500 ? "server_error" : "invalid_request_error",
    param: null,
    code: status === 401 ? "invalid_api_key" : status === 429 ? "rate_limit_exceeded" : null,
  },
});

function lastUserText(body: Record<string, unknown>): string {
  const messages = Array.isArray(body.messages) ? (body.messages as Array<{ role?: unknown; content?: unknown }>) : [];
  const last = [...messages].reverse().find((m) => m.role === "user");
  return typeof last?.content === "string" ? last.content : "";
}

const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

export interface FakeOptions {
  apiKey?: string;
  behaviour?: FakeBehaviour;
  /** Behaviour per requested model, overriding `behaviour` (one process can serve a bench's two kinds of stream). */
  byModel?: Record<string, FakeBehaviour>;
  /** false: keep no request bodies (benchmarks send hundreds of thousands). */
  record?: boolean;
}

export async function startFakeUpstream(options: FakeOptions = {}): Promise<FakeUpstream> {
  const apiKey = options.apiKey ?? "sk-fake-upstream";
  let behaviour: FakeBehaviour = options.behaviour ?? {};
  const requests: RecordedRequest[] = [];
  const stats: FakeStats = { requests: 0, aborted: 0, floodBytesSent: 0, waitingForDrain: false };
  const abortWaiters: Array<{ count: number; resolve: () => void }> = [];
  let serial = 0;

  const noteAbort = () => {
    stats.aborted++;
    for (const waiter of abortWaiters.filter((w) => stats.aborted >= w.count)) {
      abortWaiters.splice(abortWaiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    stats.requests++;
    let failingOnPurpose = false;
    res.once("close", () => {
      if (!res.writableFinished && !failingOnPurpose) noteAbort();
    });
    const breakOff = () => {
      failingOnPurpose = true;
      res.socket?.destroy();
    };
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: `Invalid URL (${req.method} ${req.url})`, type: "invalid_request_error", param: null, code: null } }));
      return;
    }
    if (req.headers.authorization !== `Bearer ${apiKey}`) {
      res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify(errorBody(401)));
      return;
    }
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
    if (options.record !== false) requests.push({ path: req.url, headers: req.headers, body });
    const now = options.byModel?.[String(body.model)] ?? behaviour;
    if (now.hang) return;
    if (now.status !== undefined && now.status !== 200) {
      res.writeHead(now.status, { "content-type": "application/json" }).end(JSON.stringify(errorBody(now.status)));
      return;
    }
    const id = `chatcmpl-fake${++serial}`;
    const created = Math.floor(Date.now() / 1000);
    const model = String(body.model);
    const content = now.content ?? `You said: ${lastUserText(body)}`;
    const usage = { prompt_tokens: 7, completion_tokens: now.toolCalls ? 5 : words(content), total_tokens: 0 };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    const finishReason = now.toolCalls ? "tool_calls" : "stop";

    if (body.stream !== true) {
      const message = now.toolCalls ? { role: "assistant", content: null, tool_calls: now.toolCalls, refusal: null } : { role: "assistant", content, refusal: null };
      const completion = { id, object: "chat.completion", created, model, choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }], ...(now.omitUsage ? {} : { usage }), system_fingerprint: "fp_fake" };
      res.writeHead(200, { "content-type": "application/json", "x-request-id": `fake-${serial}` }).end(JSON.stringify(completion));
      return;
    }
    const includeUsage = !now.omitUsage && (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, system_fingerprint: "fp_fake", choices, ...(includeUsage ? { usage: null } : {}), ...extra })}\n\n`;
    const delta = (d: Record<string, unknown>, finish: string | null = null) => [{ index: 0, delta: d, logprobs: null, finish_reason: finish }];
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
    const pause = () => new Promise<void>((resolve) => (now.chunkDelayMs ? setTimeout(resolve, now.chunkDelayMs) : setImmediate(resolve)));
    const send = async (text: string) => {
      if (res.destroyed) return;
      if (!res.write(text)) {
        stats.waitingForDrain = true;
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off("drain", done).off("close", done);
            resolve();
          };
          res.on("drain", done).on("close", done);
        });
        stats.waitingForDrain = false;
      }
    };

    await send(chunk(delta({ role: "assistant", content: "", refusal: null })));
    const pieces: string[] = [];
    if (now.toolCalls) {
      now.toolCalls.forEach((call, index) => pieces.push(chunk(delta({ tool_calls: [{ index, ...call }] }))));
    } else if (now.floodBytes) {
      const size = now.floodChunkBytes ?? 16_384;
      const text = chunk(delta({ content: "x".repeat(size) }));
      for (let sent = 0; sent < now.floodBytes && !res.destroyed; sent += size) {
        await send(text);
        stats.floodBytesSent += size;
      }
    } else {
      content.split(/(?<=\s)/).forEach((word) => pieces.push(chunk(delta({ content: word }))));
    }
    for (const [index, piece] of pieces.entries()) {
      if (res.destroyed) return;
      if (now.failAfterChunks !== undefined && index >= now.failAfterChunks) return breakOff();
      await send(piece);
      await pause();
    }
    if (now.failAfterChunks !== undefined) return breakOff();
    await send(chunk(delta({}, finishReason)));
    if (includeUsage) await send(chunk([], { usage }));
    if (!res.destroyed) res.end("data: [DONE]\n\n");
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify(errorBody(500)));
      else res.destroy(error as Error);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    apiKey,
    requests,
    stats,
    behave: (next) => {
      behaviour = next;
    },
    waitForAborts: (count) =>
      new Promise((resolve) => {
        if (stats.aborted >= count) resolve();
        else abortWaiters.push({ count, resolve });
      }),
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
