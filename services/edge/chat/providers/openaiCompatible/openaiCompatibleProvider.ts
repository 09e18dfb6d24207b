import type { Readable } from "node:stream";
import type { Dispatcher, Pool } from "undici";
import { ChatUsage, type OpenAICompatibleChatModel } from "../../../../../contracts/chat.ts";
import { UpstreamError, type ReelayError } from "../../../../shared/errors.ts";
import type { Logger } from "../../../../shared/log.ts";
import { upstreamBody, type ChatRequest } from "../../chatRequest.ts";
import type { ResponseSink } from "../../responseSink.ts";
import type { RelayedContent } from "../../relayedContent.ts";
import type { ChatProvider } from "../types.ts";
import { SseRelay } from "./sseRelay.ts";
import { transportFailure, upstreamFailure, type UpstreamPhase } from "./upstreamErrors.ts";
import { UpstreamAbort } from "./upstreamAbort.ts";
import { upstreamPool } from "../../../../shared/upstreamPools.ts";

/**
 * How long an idle connection is kept when the upstream sends no `Keep-Alive: timeout=` hint (undici
 * follows the hint, less a safety margin, when there is one). Long enough that a quiet gateway keeps its
 * TLS sessions warm; the upstream closing an idle connection first is the rare case undici cannot retry
 * for a POST (the client gets a 502, which OpenAI clients retry).
 */
const IDLE_KEEP_ALIVE_MS = 30_000;
/** Response heads larger than this are refused (the hand-written client's limit; undici's default is 16 KiB). */
const MAX_HEADER_BYTES = 64 * 1024;

/** Bounds on what we buffer from an upstream that does not stream (a completion is kilobytes). */
const MAX_JSON_BYTES = 32 * 1024 * 1024;
const MAX_ERROR_BYTES = 64 * 1024;
/**
 * The largest streamed event held until its end comes (a chunk is a few hundred bytes): an upstream that sent
 * no blank line had everything it streamed held, and joined again at every read.
 */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

/** Request headers as undici's flat name/value list, built once per key and kind of answer. */
const headersFor = (key: string, accept: string): string[] => [
  "authorization", `Bearer ${key}`, "content-type", "application/json", "accept", accept, "user-agent", "reelay",
];

/**
 * Relays chat completions to one OpenAI-compatible upstream model over undici's pooled keep-alive
 * connections. Timeouts are undici's, all `timeoutMs`: to connect, from the request to the answer's head,
 * and the longest silence between body reads — which undici does not count while we hold the body paused
 * for a slow client.
 */
export class OpenAICompatibleProvider implements ChatProvider {
  private readonly origin: string;
  /** Its pool's options: a model on the same origin with the same timeout shares the pool (a connect timeout is fixed per pool). */
  private readonly poolOptions: Pool.Options;
  private readonly path: string;
  private headers: { stream: string[]; json: string[] } | undefined;

  constructor(private readonly model: OpenAICompatibleChatModel, private readonly log: Logger) {
    const url = new URL(`${model.baseUrl}/chat/completions`);
    this.origin = url.origin;
    this.poolOptions = {
      // One request per connection at a time: a streamed answer holds its connection until it ends, and a
      // pipelined request behind it would wait for the whole stream.
      pipelining: 1,
      keepAliveTimeout: IDLE_KEEP_ALIVE_MS,
      maxHeaderSize: MAX_HEADER_BYTES,
      connect: { timeout: model.timeoutMs },
    };
    this.path = `${url.pathname}${url.search}`;
  }

  complete(request: ChatRequest, sink: ResponseSink, relayed: RelayedContent): Promise<ChatUsage | undefined> {
    const headers = this.requestHeaders(request.model);
    const { model, log } = this;
    const name = request.model;
    return new Promise((resolve, reject) => {
      // One signal cancels the upstream request whatever its stage: the client left, or we gave up on it.
      const abort = new UpstreamAbort();
      let settled = false;
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        outcome();
      };
      const fail = (error: ReelayError) =>
        settle(() => {
          abort.abort(error);
          reject(error);
        });
      const succeed = (usage: ChatUsage | undefined) => settle(() => resolve(usage));
      const broken = (phase: UpstreamPhase) => (error: unknown) => fail(transportFailure(error, name, model.timeoutMs, phase));

      /** Reads a whole (bounded) body, then hands it on. */
      const collect = (body: Readable, limit: number, done: (bytes: Buffer) => void) => {
        const chunks: Buffer[] = [];
        let size = 0;
        body.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > limit) return fail(new UpstreamError(`the upstream for model ${name} answered more than ${limit} bytes`));
          chunks.push(chunk);
        });
        body.on("end", () => done(Buffer.concat(chunks, size)));
        body.on("error", broken("body"));
      };

      const relay = (body: Readable) => {
        const sse = new SseRelay(request.clientWantsUsage);
        const resume = () => {
          if (!settled) body.resume();
        };
        body.on("data", (chunk: Buffer) => {
          const out = sse.push(chunk);
          if (sse.heldBytes > MAX_EVENT_BYTES) return fail(new UpstreamError(`the upstream for model ${name} streamed an event of more than ${MAX_EVENT_BYTES} bytes`));
          if (out && out.length > 0 && sink.open) relayed.addEvents(out);
          // Backpressure: the client is slower than the upstream. Paused, the body stops flowing; once
          // undici's buffer behind it is full, undici stops reading the socket and TCP slows the upstream.
          if (out && out.length > 0 && !sink.write(out)) {
            body.pause();
            sink.onDrain(resume);
          }
        });
        body.on("end", () => {
          const tail = sse.flush();
          if (tail && sink.open) relayed.addEvents(tail);
          if (!sse.sawDone) {
            if (tail) sink.write(tail);
            return fail(new UpstreamError(`the upstream for model ${name} ended the stream early`));
          }
          sink.end(tail);
          succeed(sse.usage);
        });
        body.on("error", broken("stream"));
      };

      const answered = (error: Error | null, response: Dispatcher.ResponseData) => {
        if (error) return broken("head")(error);
        const { statusCode, body } = response;
        if (statusCode !== 200) return collect(body, MAX_ERROR_BYTES, (bytes) => fail(upstreamFailure(statusCode, bytes, name, log)));
        if (!request.stream) {
          return collect(body, MAX_JSON_BYTES, (bytes) => {
            const completion = jsonOf(bytes);
            if (completion === undefined) return fail(new UpstreamError(`the upstream for model ${name} answered invalid JSON`));
            if (sink.open) relayed.addCompletion(completion);
            sink.reply(200, "application/json", bytes);
            succeed(usageOf(completion));
          });
        }
        const contentType = String(response.headers["content-type"] ?? "");
        if (!contentType.includes("text/event-stream")) {
          return fail(new UpstreamError(`the upstream for model ${name} answered a stream request with ${contentType || "no content type"}`));
        }
        relay(body);
      };

      upstreamPool(this.origin, this.poolOptions).request(
        {
          path: this.path,
          method: "POST",
          headers: request.stream ? headers.stream : headers.json,
          body: upstreamBody(request, model.upstreamModel, model.maxCompletionTokens),
          signal: abort,
          headersTimeout: model.timeoutMs,
          bodyTimeout: model.timeoutMs,
        },
        answered,
      );
      // The client left: stop the upstream too (it stops generating, and billing us, for nobody).
      sink.onAbort(() =>
        settle(() => {
          abort.abort();
          resolve(undefined);
        }),
      );
    });
  }

  /** The request headers, or a 502 when the upstream key is not in the environment. */
  private requestHeaders(name: string): { stream: string[]; json: string[] } {
    if (this.headers) return this.headers;
    // Cached once set (process.env is a slow getter), and looked up again while it is missing.
    const key = process.env[this.model.apiKeyEnv];
    if (!key) {
      this.log.error({ model: name, env: this.model.apiKeyEnv }, "chat upstream key is not set in the environment");
      throw new UpstreamError(`model ${name} is not available: its upstream is not configured`, {
        code: "upstream_not_configured",
      });
    }
    this.headers = { stream: headersFor(key, "text/event-stream"), json: headersFor(key, "application/json") };
    return this.headers;
  }
}

/** A non-streaming completion's JSON; undefined when the body is not a JSON object at all. */
function jsonOf(body: Buffer): object | undefined {
  try {
    const parsed: unknown = JSON.parse(body.toString("utf8"));
    return typeof parsed === "object" && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The usage of a completion, if it reports one. */
function usageOf(completion: object): ChatUsage | undefined {
  const usage = ChatUsage.safeParse((completion as { usage?: unknown }).usage);
  return usage.success ? usage.data : undefined;
}
