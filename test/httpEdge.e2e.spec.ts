import { connect } from "node:net";
import fc from "fast-check";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEdge } from "../services/edge/main.ts";
import { silentLog, startTestApp, type TestApp } from "./helpers/testApp.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { expectReadyAgain } from "./helpers/readiness.ts";

/**
 * Sends raw bytes on one connection and collects everything until the server closes it (`closed`), or
 * until `ms` passes with the connection still open.
 */
function rawExchange(port: number, bytes: string, ms = 2000): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closed: false });
    }, ms);
    socket.on("data", (chunk) => (text += chunk.toString("latin1")));
    socket.on("end", () => {
      clearTimeout(timer);
      resolve({ text, closed: true });
    });
    socket.on("error", reject);
    socket.write(bytes);
  });
}

/** The status of the first answer on a connection (as soon as its head is in), or 0 if none came within `ms`. */
function firstStatus(port: number, bytes: string | Buffer, ms = 2000): Promise<number> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    const done = (status: number) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(status);
    };
    const timer = setTimeout(() => done(0), ms);
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
      if (text.includes("\r\n\r\n")) done(Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? -1));
    });
    // The server may close before reading all we sent (a parse error): what it answered still counts.
    socket.on("error", () => {});
    socket.on("close", () => done(Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? -1)));
    socket.write(bytes);
  });
}

/** The edge on node:http, as a stock proxy, an old client or an attacker talks to it. */
describe("HTTP edge", () => {
  let app: TestApp;
  let key: string;
  let port: number;

  beforeAll(async () => {
    app = await startTestApp({ providers: () => new ScriptedVendor(), tweak: (config) => (config.cors.allowedOrigins = ["https://app.example"]) });
    key = await app.keyFor("raw", 100);
    port = Number(new URL(app.baseUrl).port);
  });
  afterAll(async () => app?.stop());

  const createBody = JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 });

  it("answers HTTP/1.0 (nginx's default to upstreams) and closes the connection, or keeps it when asked", async () => {
    const health = await rawExchange(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect(health.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(health.text).toMatch(/\r\n\r\n\{"status":"ok"\}$/);
    expect(health.closed).toBe(true);
    const created = await rawExchange(
      port,
      `POST /api/compat/videosGenerations HTTP/1.0\r\nHost: reelay.test\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${createBody.length}\r\n\r\n${createBody}`,
    );
    expect(created.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(created.closed).toBe(true);
    const taskId = /"task_id":(\d+)/.exec(created.text)?.[1];
    // Keep-alive asked for: the connection stays for a second request (the query), which closes it.
    const query = (connection: string) => `GET /api/compat/videosTask?id=${taskId} HTTP/1.0\r\nAuthorization: Bearer ${key}\r\n${connection}\r\n`;
    const both = await rawExchange(port, query("Connection: keep-alive\r\n") + query(""));
    expect([...both.text.matchAll(/HTTP\/1\.1 200 OK\r\n/g)]).toHaveLength(2);
    expect(both.text).toMatch(/connection: keep-alive\r\n/i);
    expect([...both.text.matchAll(new RegExp(`"task_id":${taskId}`, "g"))]).toHaveLength(2);
    expect(both.closed).toBe(true);
  });

  it("answers pipelined requests, all of them, in order", async () => {
    const query = `GET /healthz HTTP/1.1\r\nHost: reelay.test\r\n\r\n`;
    const create = `POST /api/compat/videosGenerations HTTP/1.1\r\nHost: reelay.test\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${createBody.length}\r\n\r\n${createBody}`;
    const last = `GET /healthz HTTP/1.1\r\nHost: reelay.test\r\nConnection: close\r\n\r\n`;
    const answer = (await rawExchange(port, create + query + last, 10_000)).text;
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(["200", "200", "200"]);
    expect(answer.indexOf('"task_id"')).toBeLessThan(answer.indexOf('{"status":"ok"}'));
  });

  it("bounds headers (431) and request targets (414), in the format of the path's API", async () => {
    const huge = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(huge.text).toMatch(/^HTTP\/1\.1 431 [^]*\{"code":431,"msg":"request line and headers exceed 16384 bytes"\}$/);
    const long = await rawExchange(port, `GET /healthz?${"q".repeat(9000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(long.text).toMatch(/^HTTP\/1\.1 414 [^]*"msg":"request target longer than 8192 bytes"/);
    // Longer than the whole head limit: still a 414 (node:http counts the request line in its header limit).
    const longer = await rawExchange(port, `POST /api/compat/chat/completions?${"q".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(longer.text).toMatch(/^HTTP\/1\.1 414 [^]*\{"error":\{"message":"request target longer than 8192 bytes","type":"invalid_request_error","param":null,"code":null\}\}$/);
    const chatHeaders = await rawExchange(port, `POST /api/compat/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${"k".repeat(20_000)}\r\n\r\n`);
    expect(chatHeaders.text).toMatch(/^HTTP\/1\.1 431 [^]*"error":\{"message":"request line and headers exceed 16384 bytes"/);
  });

  it.each([
    { name: "a garbage request line", bytes: "HELLO THERE\r\n\r\n", status: 400, msg: "malformed HTTP request" },
    { name: "a NUL in a header value", bytes: "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n", status: 400, msg: "malformed HTTP request" },
    { name: "an unsupported Transfer-Encoding", bytes: "POST /api/compat/videosGenerations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400, msg: "malformed HTTP request" },
    { name: "HTTP/1.1 without Host", bytes: "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", status: 400, msg: "HTTP/1.1 requests need a Host header" },
    { name: "two Host headers", bytes: "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n", status: 400, msg: "more than one Host header" },
    { name: "an unknown method", bytes: "FROB /healthz HTTP/1.1\r\nHost: x\r\n\r\n", status: 501, msg: "method FROB is not implemented" },
    { name: "CONNECT (reelay is no proxy)", bytes: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", status: 501, msg: "CONNECT is not supported" },
    { name: "a known method the path does not take", bytes: "PATCH /api/compat/videosTask HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", status: 405, msg: "PATCH is not allowed on /api/compat/videosTask (allowed: GET, HEAD)" },
  ])("answers $name with $status, closing the connection", async ({ bytes, status, msg }) => {
    const answer = await rawExchange(port, bytes);
    expect(answer.text).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(answer.text).toContain(`"msg":"${msg}`);
    expect(answer.closed).toBe(true);
  });

  it("never leaves a request unanswered or crashes, whatever the request head (property)", async () => {
    const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/);
    const method = fc.oneof(fc.constantFrom("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "PURGE", "get", "CONNECT"), token);
    const target = fc.oneof(
      fc.constantFrom("/healthz", "/api/compat/videosTask?id=1", "/api/compat/models", "/api/compat/chat/completions", "/videos/a.mp4", "*", "/%E0%A4%A", "http://x/healthz"),
      fc.string({ unit: "binary-ascii", maxLength: 40 }).map((rest) => `/${rest.replace(/[\s]/g, "")}`),
    );
    const version = fc.constantFrom("HTTP/1.1", "HTTP/1.0", "HTTP/9.9", "HTTP/1", "", "http/1.1");
    const headerName = fc.oneof(fc.constantFrom("Host", "Origin", "Authorization", "Range", "Idempotency-Key", "X_Under", "x.dot!~|"), token);
    const headerValue = fc.string({ unit: "binary-ascii", maxLength: 30 }).map((value) => value.replace(/[\r\n]/g, ""));
    const head = fc.record({
      method,
      target,
      version,
      headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 5 }),
      eol: fc.constantFrom("\r\n", "\n"),
    });
    await fc.assert(
      fc.asyncProperty(head, async ({ method, target, version, headers, eol }) => {
        const lines = [[method, target, version].filter((part) => part !== "").join(" "), ...headers.map(([name, value]) => `${name}: ${value}`)];
        const status = await firstStatus(port, `${lines.join(eol)}${eol}${eol}`);
        // Answered (not hung up on or left waiting), and never as if the server had failed.
        expect(status).toBeGreaterThanOrEqual(200);
        expect([500, 502, 503, 504]).not.toContain(status);
      }),
      { numRuns: 150 },
    );
    await expectReadyAgain(app.baseUrl);
  });

  it("survives a client that resets right after CONNECT or mid-body", async () => {
    for (const bytes of ["CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", `POST /api/compat/videosGenerations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Length: 100\r\n\r\n{"a":`]) {
      await new Promise<void>((resolve) => {
        const socket = connect(port, "127.0.0.1", () => socket.write(bytes, () => setTimeout(() => socket.resetAndDestroy(), 20)));
        socket.on("close", () => resolve());
        socket.on("error", () => {});
      });
    }
    await expectReadyAgain(app.baseUrl);
  });

  it("answers HEAD wherever GET works: the GET answer's headers, no body", async () => {
    const head = await rawExchange(port, "HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(head.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*content-length: 15\r\n[^]*\r\n\r\n$/);
    const query = await fetch(`${app.baseUrl}/api/compat/videosTask?id=999999`, { method: "HEAD", headers: { authorization: `Bearer ${key}` } });
    expect(query.status).toBe(404);
    expect(query.headers.get("content-type")).toBe("application/json");
  });

  it("names every video answer with x-request-id, like chat ones", async () => {
    const query = await fetch(`${app.baseUrl}/api/compat/videosTask?id=999999`, { headers: { authorization: `Bearer ${key}` } });
    expect(query.status).toBe(404);
    expect(query.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
  });

  it("sends no server-identifying headers", async () => {
    const response = await fetch(`${app.baseUrl}/healthz`);
    expect(response.headers.get("uwebsockets")).toBeNull();
    expect(response.headers.get("x-powered-by")).toBeNull();
    expect(response.headers.get("server")).toBeNull();
  });

  it("refuses to start a second edge on a port in use, naming the port", async () => {
    const second = startEdge(app.nats, app.config, silentLog, { host: "127.0.0.1", port, publicUrl: undefined });
    await expect(second).rejects.toThrow(new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use.*set PORT to a free port`));
  });

  it("refuses to start an edge whose admin port is in use, naming REELAY_ADMIN_PORT (not PORT, which is free)", async () => {
    const second = startEdge(app.nats, app.config, silentLog, { host: "127.0.0.1", port: 0, publicUrl: undefined, admin: { host: "127.0.0.1", port } });
    await expect(second).rejects.toThrow(new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use.*set REELAY_ADMIN_PORT \\(or "off"\\) to a free port`));
  });

  it("answers CORS preflights for allowed origins only, and marks their answers", async () => {
    const preflight = (origin: string, requestHeaders?: string) =>
      fetch(`${app.baseUrl}/api/compat/chat/completions`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", ...(requestHeaders ? { "access-control-request-headers": requestHeaders } : {}) },
      });
    // The OpenAI SDK in a browser asks for its x-stainless-* headers: what is asked is allowed.
    const allowed = await preflight("https://app.example", "authorization, content-type, x-stainless-os");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(allowed.headers.get("access-control-allow-headers")).toBe("authorization, content-type, x-stainless-os");
    expect(allowed.headers.get("access-control-allow-methods")).toBe("GET, HEAD, POST, DELETE, OPTIONS");
    expect(allowed.headers.get("access-control-max-age")).toBe("600");
    expect((await preflight("https://app.example")).headers.get("access-control-allow-headers")).toBe("authorization, content-type, idempotency-key, last-event-id, x-request-id");
    // Another origin: 204 without any Access-Control-* header, so the browser refuses the call.
    const refused = await preflight("https://evil.example", "authorization");
    expect(refused.status).toBe(204);
    const corsHeaders: string[] = [];
    refused.headers.forEach((_value, name) => name.startsWith("access-control-") && corsHeaders.push(name));
    expect(corsHeaders).toEqual([]);
    const models = await fetch(`${app.baseUrl}/api/compat/models`, { headers: { origin: "https://app.example", authorization: `Bearer ${key}` } });
    expect(models.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(models.headers.get("access-control-expose-headers")).toBe("x-request-id, retry-after");
    // Answers depend on Origin: caches in front (a CDN before /videos) must keep them apart, whoever asked.
    const plain = await fetch(`${app.baseUrl}/healthz`);
    expect(plain.headers.get("vary")).toBe("Origin");
    expect(plain.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("answers paths OpenAI clients call but reelay does not serve as OpenAI does (typed NotFoundError), the video API's in its envelope", async () => {
    const client = new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: key, maxRetries: 0 });
    await expect(client.embeddings.create({ model: "echo", input: "x" })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.videos.create({ model: "sora-2", prompt: "a fox" })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const responses = await client.responses.create({ model: "echo", input: "x" }).catch((error: unknown) => error);
    expect(responses).toMatchObject({ status: 404, type: "invalid_request_error", param: null, code: "unknown_url" });
    expect((responses as { error: { message: string } }).error.message).toMatch(/^Unknown request URL: POST \/api\/compat\/responses\. Please check the URL for typos/);
    for (const path of ["/api/compat/completions", "/api/compat/images/generations", "/api/compat/audio/speech", "/api/compat/anything/else"]) {
      const raw = await fetch(`${app.baseUrl}${path}`, { method: "POST" });
      expect(raw.status).toBe(404);
      expect(((await raw.json()) as { error: { code: string } }).error.code).toBe("unknown_url");
    }
    // A wrong method on an OpenAI path: 405 with Allow, in OpenAI's shape.
    const wrongMethod = await fetch(`${app.baseUrl}/api/compat/models`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("GET, HEAD");
    expect(await wrongMethod.json()).toEqual({ error: { message: "POST is not allowed on /api/compat/models (allowed: GET, HEAD)", type: "invalid_request_error", param: null, code: null } });
    const video = await fetch(`${app.baseUrl}/api/compat/videosNope`);
    expect(await video.json()).toEqual({ code: 404, msg: "no such endpoint: GET /api/compat/videosNope" });
  });

  it("builds video addresses from a valid Host only; forwarded headers count only from trusted proxies", async () => {
    const created = await fetch(`${app.baseUrl}/api/compat/videosGenerations`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: createBody });
    const taskId = ((await created.json()) as { data: { task_id: number } }).data.task_id;
    const query = async (host: string, extra = "") =>
      (await rawExchange(port, `GET /api/compat/videosTask?id=${taskId} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\n${extra}Connection: close\r\n\r\n`)).text;
    await expect.poll(async () => (await query("videos.example")).includes('"success"'), { timeout: 10_000 }).toBe(true);
    expect(await query("videos.example")).toContain('"video_url":"http://videos.example/videos/');
    // Not a host: the edge's own address instead of the client's string.
    expect(await query("evil.example/<script>")).toContain(`"video_url":"http://localhost:${port}/videos/`);
    // Forwarded headers from an untrusted peer are ignored.
    expect(await query("videos.example", "X-Forwarded-Proto: https\r\nX-Forwarded-Host: attacker.example\r\n")).toContain('"video_url":"http://videos.example/videos/');
  });
});
