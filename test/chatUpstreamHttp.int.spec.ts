import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OpenAICompatibleChatModel } from "../contracts/chat.ts";
import type { ChatRequest } from "../services/edge/chat/chatRequest.ts";
import { OpenAICompatibleProvider } from "../services/edge/chat/providers/openaiCompatible/openaiCompatibleProvider.ts";
import { closeUpstreamPools } from "../services/shared/upstreamPools.ts";
import { UpstreamError, UpstreamTimeoutError } from "../services/shared/errors.ts";
import { startFakeUpstream, type FakeUpstream } from "./fakes/openaiUpstream.ts";
import { RelayedContent } from "../services/edge/chat/relayedContent.ts";
import { RecordingSink } from "./helpers/recordingSink.ts";

/**
 * The OpenAI-compatible provider over its real HTTP client (undici), against real sockets: a fake
 * OpenAI upstream for whole exchanges, and a raw TCP server whose answers the test scripts byte for byte.
 */
const KEY_ENV = "REELAY_UPSTREAM_SPEC_KEY";
const log = pino({ level: "silent" });

const chatRequest = (stream: boolean): ChatRequest => ({
  body: { model: "m", messages: [{ role: "user", content: "hi there" }], stream },
  model: "m",
  messages: [{ role: "user", content: "hi there" }],
  stream,
  clientWantsUsage: false,
  maxAnswerTokens: undefined,
});

const providerFor = (baseUrl: string, timeoutMs = 2000) => {
  const model: OpenAICompatibleChatModel = {
    provider: "openai-compatible",
    baseUrl,
    apiKeyEnv: KEY_ENV,
    upstreamModel: "upstream-m",
    inputPricePerMillionTokens: 1,
    outputPricePerMillionTokens: 2,
    timeoutMs,
    maxCompletionTokens: 4096,
  };
  return new OpenAICompatibleProvider(model, log);
};

const until = async (condition: () => boolean, what: string) => {
  for (let tries = 0; tries < 200 && !condition(); tries++) await new Promise((resolve) => setTimeout(resolve, 25));
  if (!condition()) throw new Error(`timed out waiting for ${what}`);
};

const chunked = (parts: string[]) => parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join("");
const SSE_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
const event = (content: string) => `data: {"choices":[{"index":0,"delta":{"content":"${content}"}}]}\n\n`;

describe("OpenAI-compatible upstream client (undici)", () => {
  let fake: FakeUpstream;
  let raw: Server;
  let rawUrl: string;
  /** How the raw server answers each complete request; its sockets, to count connections and see closes. */
  let answer: (socket: Socket, request: string) => void = () => {};
  const sockets: Socket[] = [];
  const closed = new Set<Socket>();

  beforeAll(async () => {
    fake = await startFakeUpstream();
    process.env[KEY_ENV] = fake.apiKey;
    raw = createServer((socket) => {
      sockets.push(socket);
      socket.on("close", () => closed.add(socket));
      socket.on("error", () => {});
      let buffered = "";
      socket.on("data", (data) => {
        buffered += data.toString();
        const end = buffered.indexOf("\r\n\r\n");
        const length = Number(/content-length: (\d+)/i.exec(buffered)?.[1] ?? 0);
        if (end >= 0 && buffered.length >= end + 4 + length) {
          const request = buffered;
          buffered = "";
          answer(socket, request);
        }
      });
    });
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    rawUrl = `http://127.0.0.1:${(raw.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    await closeUpstreamPools();
    for (const socket of sockets) socket.destroy();
    raw.close();
    await fake.stop();
  });

  it("sends the request re-addressed to the upstream model, and reuses one keep-alive connection", async () => {
    const seen: string[] = [];
    answer = (socket, request) => {
      seen.push(request);
      socket.write(`${SSE_HEAD}${chunked([event("a"), event("b"), "data: [DONE]\n\n"])}0\r\n\r\n`);
    };
    const provider = providerFor(rawUrl);
    const before = sockets.length;
    for (let i = 0; i < 10; i++) {
      const sink = new RecordingSink();
      await provider.complete(chatRequest(true), sink, new RelayedContent());
      expect(sink.ended).toBe(true);
      expect(sink.text).toBe(`${event("a")}${event("b")}data: [DONE]\n\n`);
    }
    // undici frees a connection one event-loop turn after its response ended (a server that closes despite
    // keep-alive is seen first), so a request sent at once takes a second one; from then on they alternate.
    expect(sockets.length - before).toBeLessThanOrEqual(2);
    for (let i = 0; i < 5; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      await provider.complete(chatRequest(true), new RecordingSink(), new RelayedContent());
    }
    expect(sockets.length - before).toBeLessThanOrEqual(2);
    const [head = "", body = ""] = (seen[0] ?? "").split("\r\n\r\n");
    expect(head).toMatch(/^POST \/v1\/chat\/completions HTTP\/1\.1\r\n/);
    expect(head).toMatch(/\r\nauthorization: Bearer sk-fake-upstream\r\n/i);
    expect(head).toMatch(/\r\naccept: text\/event-stream\r\n/i);
    expect(JSON.parse(body)).toMatchObject({ model: "upstream-m", stream: true, stream_options: { include_usage: true } });
  });

  it("relays a non-streaming completion whole and returns its usage", async () => {
    const sink = new RecordingSink();
    const usage = await providerFor(fake.baseUrl).complete(chatRequest(false), sink, new RelayedContent());
    expect(usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 4 });
    expect(sink.replied).toMatchObject({ status: 200, contentType: "application/json" });
    expect(JSON.parse(sink.replied?.body.toString() ?? "")).toMatchObject({ object: "chat.completion", choices: [{ message: { content: "You said: hi there" } }] });
  });

  it("aborts the upstream request when the client leaves mid-stream", async () => {
    fake.behave({ content: "word ".repeat(200), chunkDelayMs: 20 });
    const abortsBefore = fake.stats.aborted;
    const sink = new RecordingSink();
    const done = providerFor(fake.baseUrl).complete(chatRequest(true), sink, new RelayedContent());
    await sink.started;
    sink.leave();
    await expect(done).resolves.toBeUndefined();
    await fake.waitForAborts(abortsBefore + 1);
    fake.behave({});
  });

  it("answers a timeout (504) when the head does not come in time, and hangs up on the upstream", async () => {
    answer = () => {};
    const started = Date.now();
    const error = await providerFor(rawUrl, 300).complete(chatRequest(true), new RecordingSink(), new RelayedContent()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UpstreamTimeoutError);
    expect(error).toMatchObject({ status: 504, message: expect.stringMatching(/did not answer within 300 ms/) });
    expect(Date.now() - started).toBeLessThan(1500);
    const socket = sockets.at(-1);
    await until(() => socket !== undefined && closed.has(socket), "the upstream connection to close");
  });

  it("answers a timeout when a stream goes silent, after relaying what came", async () => {
    answer = (socket) => socket.write(`${SSE_HEAD}${chunked([event("a")])}`);
    const sink = new RecordingSink();
    const error = await providerFor(rawUrl, 300).complete(chatRequest(true), sink, new RelayedContent()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UpstreamTimeoutError);
    expect(sink.text).toBe(event("a"));
  });

  it("reports an upstream reset mid-stream as a broken stream (the edge then sends an SSE error event)", async () => {
    answer = (socket) => {
      socket.write(`${SSE_HEAD}${chunked([event("a")])}`);
      setTimeout(() => socket.resetAndDestroy(), 20);
    };
    const sink = new RecordingSink();
    const error = await providerFor(rawUrl).complete(chatRequest(true), sink, new RelayedContent()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UpstreamError);
    expect(error).toMatchObject({ status: 502, message: expect.stringMatching(/broke off the stream/) });
    expect(sink.streaming).toBe(true);
    expect(sink.text).toBe(event("a"));
  });

  it("gives up a stream whose event never ends (no blank line) past 4 MiB, with a 502 and the stream relayed so far (it held everything it streamed)", async () => {
    let hungUp = false;
    answer = (socket) => {
      socket.write(`${SSE_HEAD}${chunked([event("a")])}`);
      const line = `${"x".repeat(64 * 1024 - 1)}\n`;
      const more = () => {
        if (hungUp || socket.destroyed) return;
        socket.write(chunked([line]), () => setImmediate(more));
      };
      socket.on("close", () => (hungUp = true));
      more();
    };
    const sink = new RecordingSink();
    const error = await providerFor(rawUrl, 10_000).complete(chatRequest(true), sink, new RelayedContent()).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 502, message: expect.stringMatching(/streamed an event of more than 4194304 bytes/) });
    expect(sink.text).toBe(event("a"));
    await until(() => hungUp, "the upstream to be hung up on");
  });

  it("reports a refused connection and a malformed answer as a bad gateway hop (502)", async () => {
    const refused = await providerFor("http://127.0.0.1:1/v1").complete(chatRequest(true), new RecordingSink(), new RelayedContent()).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 502, message: expect.stringMatching(/cannot reach the upstream for model m: ECONNREFUSED/) });
    answer = (socket) => socket.write("SMTP ready\r\n\r\n");
    const malformed = await providerFor(rawUrl).complete(chatRequest(true), new RecordingSink(), new RelayedContent()).catch((e: unknown) => e);
    expect(malformed).toMatchObject({ status: 502, message: expect.stringMatching(/malformed HTTP/) });
  });

  it("stops reading the upstream while the client is slow, without counting that time as silence, and loses nothing", async () => {
    const total = 64 * 1024 * 1024;
    fake.behave({ floodBytes: total, floodChunkBytes: 16_384 });
    const sink = new RecordingSink();
    sink.block();
    // A timeout far shorter than the stall below: time held paused for the client must not count.
    const done = providerFor(fake.baseUrl, 300).complete(chatRequest(true), sink, new RelayedContent());
    await until(() => sink.waitingForDrain, "the provider to wait for drain");
    // The fake blocks on drain once the bounded buffers between it and the sink are full.
    let stalledAt = -1;
    await until(() => {
      const stalled = fake.stats.waitingForDrain && fake.stats.floodBytesSent === stalledAt;
      stalledAt = fake.stats.floodBytesSent;
      return stalled;
    }, "the upstream to see backpressure");
    const writesWhileBlocked = sink.writes;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(sink.writes).toBe(writesWhileBlocked);
    // The gateway holds a bounded amount: its own body buffer plus the sockets' kernel buffers.
    expect(stalledAt).toBeLessThan(16 * 1024 * 1024);
    expect(sink.bytes).toBeLessThan(1024 * 1024);
    sink.unblock();
    const usage = await done;
    expect(usage).toMatchObject({ prompt_tokens: 7 });
    expect(fake.stats.floodBytesSent).toBe(total);
    expect(sink.bytes).toBeGreaterThan(total);
    expect(sink.ended).toBe(true);
    fake.behave({});
  });
});
