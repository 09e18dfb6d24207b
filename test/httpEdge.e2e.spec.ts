import { connect } from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEdge } from "../services/edge/main.ts";
import { silentLog, startTestApp, type TestApp } from "./helpers/testApp.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";

/** Sends raw bytes on one connection and collects everything until the server closes it (or `ms` passes). */
function rawExchange(port: number, bytes: string, ms = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(received);
    }, ms);
    socket.on("data", (chunk) => (received += chunk.toString("latin1")));
    socket.on("end", () => {
      clearTimeout(timer);
      resolve(received);
    });
    socket.on("error", reject);
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

  it("answers HTTP/1.0 (nginx's default to upstreams) and closes the connection", async () => {
    const answer = await rawExchange(port, "GET /healthz HTTP/1.0\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer).toMatch(/\r\n\r\n\{"status":"ok"\}$/);
    const created = await rawExchange(
      port,
      `POST /api/compat/videosGenerations HTTP/1.0\r\nHost: reelay.test\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${createBody.length}\r\n\r\n${createBody}`,
    );
    expect(created).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(created).toMatch(/"task_id":\d+/);
  });

  it("answers pipelined requests, all of them, in order", async () => {
    const query = `GET /healthz HTTP/1.1\r\nHost: reelay.test\r\n\r\n`;
    const create = `POST /api/compat/videosGenerations HTTP/1.1\r\nHost: reelay.test\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${createBody.length}\r\n\r\n${createBody}`;
    const last = `GET /healthz HTTP/1.1\r\nHost: reelay.test\r\nConnection: close\r\n\r\n`;
    const answer = await rawExchange(port, create + query + last, 10_000);
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
    expect(statuses).toEqual(["200", "200", "200"]);
    expect(answer.indexOf('"task_id"')).toBeLessThan(answer.indexOf('{"status":"ok"}'));
  });

  it("bounds headers (431) and request targets (414), and refuses malformed requests with 400, staying up", async () => {
    const huge = await rawExchange(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    const long = await rawExchange(port, `GET /healthz?${"q".repeat(9000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(long).toMatch(/^HTTP\/1\.1 414 /);
    const garbage = await rawExchange(port, "HELLO THERE\r\n\r\n");
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    const underscore = await rawExchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX_Under_Score: 1\r\nConnection: close\r\n\r\n");
    expect(underscore).toMatch(/^HTTP\/1\.1 200 /);
    expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
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
    await expect(second).rejects.toThrow(new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
  });

  it("answers CORS preflights for allowed origins only, and marks their answers", async () => {
    const preflight = (origin: string) =>
      fetch(`${app.baseUrl}/api/compat/chat/completions`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type, x-stainless-os" },
      });
    const allowed = await preflight("https://app.example");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(allowed.headers.get("access-control-allow-headers")).toBe("authorization, content-type, x-stainless-os");
    const refused = await preflight("https://evil.example");
    expect(refused.headers.get("access-control-allow-origin")).toBeNull();
    const models = await fetch(`${app.baseUrl}/api/compat/models`, { headers: { origin: "https://app.example", authorization: `Bearer ${key}` } });
    expect(models.headers.get("access-control-allow-origin")).toBe("https://app.example");
  });

  it("answers paths OpenAI clients call but reelay does not serve in OpenAI's shape (typed NotFoundError)", async () => {
    const client = new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: key, maxRetries: 0 });
    await expect(client.embeddings.create({ model: "echo", input: "x" })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.create({ model: "echo", input: "x" })).rejects.toMatchObject({ status: 404, code: "unknown_url" });
    const video = await fetch(`${app.baseUrl}/api/compat/videosNope`);
    expect(await video.json()).toEqual({ code: 404, msg: "no such endpoint: GET /api/compat/videosNope" });
  });

  it("builds video addresses from a valid Host only; forwarded headers count only from trusted proxies", async () => {
    const created = await fetch(`${app.baseUrl}/api/compat/videosGenerations`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: createBody });
    const taskId = ((await created.json()) as { data: { task_id: number } }).data.task_id;
    const query = (host: string, extra = "") =>
      rawExchange(port, `GET /api/compat/videosTask?id=${taskId} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${key}\r\n${extra}Connection: close\r\n\r\n`);
    await expect.poll(async () => (await query("videos.example")).includes('"success"'), { timeout: 10_000 }).toBe(true);
    expect(await query("videos.example")).toContain('"video_url":"http://videos.example/videos/');
    // Not a host: the edge's own address instead of the client's string.
    expect(await query("evil.example/<script>")).toContain(`"video_url":"http://localhost:${port}/videos/`);
    // Forwarded headers from an untrusted peer are ignored.
    expect(await query("videos.example", "X-Forwarded-Proto: https\r\nX-Forwarded-Host: attacker.example\r\n")).toContain('"video_url":"http://videos.example/videos/');
  });
});
