import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freeLoopbackPort } from "../infra/natsServer.ts";
import { startFakeUpstream, type FakeUpstream } from "./fakes/openaiUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

const NGINX = ["/usr/sbin/nginx", "/usr/bin/nginx"].find((path) => spawnSync(path, ["-v"]).status === 0);
const SHIPPED = new URL("../infra/nginx/reelay.conf", import.meta.url).pathname;

/** A whole nginx.conf around a server block, with every path nginx writes in `dir` (no root, no /var). */
const mainConfig = (dir: string, server: string) => `
daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  ${server}
}`;

/**
 * nginx on a port picked ahead (it cannot report one it chose): another test's server may take it first. Then
 * nginx exits, and the next attempt takes another port; an answer counts only when nginx gives it (its Server
 * header: reelay sends none), never another server's on that port.
 */
async function startNginx(server: string): Promise<{ url: string; proc: ChildProcess }> {
  const dir = mkdtempSync(join(tmpdir(), "reelay-nginx-"));
  for (let attempt = 1; attempt <= 5; attempt++) {
    const port = await freeLoopbackPort();
    const file = join(dir, "nginx.conf");
    writeFileSync(file, mainConfig(dir, server.replaceAll("listen 80;", `listen 127.0.0.1:${port};`)));
    const proc = spawn(NGINX as string, ["-p", dir, "-c", file], { stdio: "ignore" });
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 100 && proc.exitCode === null; i++) {
      const answer = await fetch(`${url}/healthz`).catch(() => undefined);
      if (answer?.ok && answer.headers.get("server")?.startsWith("nginx")) return { url, proc };
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    proc.kill("SIGKILL");
  }
  throw new Error(`nginx did not come up: ${readFileSync(join(dir, "error.log"), "utf8")}`);
}

/** Reads an event stream until its first event arrives, and says whether the stream was still open then. */
async function firstEventWhileOpen(url: string, key: string, taskId: number): Promise<{ event: string; open: boolean }> {
  const controller = new AbortController();
  // A buffering proxy holds the event until the stream ends, which this one never does: give up after 5 s.
  const timer = setTimeout(() => controller.abort(), 5000);
  let text = "";
  try {
    const response = await fetch(`${url}/api/compat/videosTask/events?id=${taskId}`, { headers: { authorization: `Bearer ${key}` }, signal: controller.signal });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    while (!text.includes("event: status")) {
      const { value, done } = await reader.read();
      if (done) return { event: text, open: false };
      text += new TextDecoder().decode(value);
    }
    return { event: text, open: true };
  } catch {
    return { event: text, open: false };
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}

describe.skipIf(!NGINX)("reelay behind nginx (Debian's)", () => {
  let app: TestApp;
  const vendor = new ScriptedVendor();
  let key: string;
  const proxies: ChildProcess[] = [];

  let upstream: FakeUpstream;

  beforeAll(async () => {
    // A chat upstream that takes its time between chunks: a buffering proxy would deliver them all at the end.
    upstream = await startFakeUpstream({ behaviour: { content: "one two three four", chunkDelayMs: 250 } });
    process.env.REELAY_TEST_SLOW_UPSTREAM_KEY = upstream.apiKey;
    app = await startTestApp({
      providers: () => vendor,
      trustedProxies: ["127.0.0.1"],
      tweak: (config) => {
        config.chatModels["slow-gpt"] = {
          provider: "openai-compatible",
          baseUrl: upstream.baseUrl,
          apiKeyEnv: "REELAY_TEST_SLOW_UPSTREAM_KEY",
          upstreamModel: "slow",
          inputPricePerMillionTokens: 1,
          outputPricePerMillionTokens: 1,
          timeoutMs: 5000,
          maxCompletionTokens: 4096,
        };
      },
    });
    key = await app.keyFor("proxied", 100);
  });
  afterAll(async () => {
    for (const proc of proxies) proc.kill("SIGKILL");
    await app?.stop();
    await upstream?.stop();
  });

  const edgePort = () => new URL(app.baseUrl).port;

  for (const [name, server] of [
    // nginx's defaults: HTTP/1.0 to the upstream, buffering on, Host = the upstream's address.
    ["default proxy settings", () => `server { listen 80; location / { proxy_pass http://127.0.0.1:${edgePort()}; } }`],
    ["the shipped infra/nginx/reelay.conf", () => readFileSync(SHIPPED, "utf8").replace("server 127.0.0.1:8080;", `server 127.0.0.1:${edgePort()};`)],
  ] as const) {
    it(`works with ${name}: create, query, video with Range, streaming chat (chunk by chunk), live task events`, async () => {
      const nginx = await startNginx(server());
      proxies.push(nginx.proc);
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };

      vendor.generation = { kind: "succeed", after: 1 };
      const created = await fetch(`${nginx.url}/api/compat/videosGenerations`, { method: "POST", headers, body: JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 }) });
      expect(created.status).toBe(200);
      const taskId = ((await created.json()) as { data: { task_id: number } }).data.task_id;
      let data: { status?: string; video_url?: string } = {};
      for (let i = 0; i < 200 && data.status !== "success"; i++) {
        data = ((await (await fetch(`${nginx.url}/api/compat/videosTask?id=${taskId}`, { headers })).json()) as { data: typeof data }).data;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(data.status).toBe("success");
      // The shipped config forwards the public host: video addresses point at the proxy, not at reelay.
      if (name.startsWith("the shipped")) expect(data.video_url).toMatch(new RegExp(`^${nginx.url}/videos/`));
      const videoPath = new URL(String(data.video_url)).pathname;
      const range = await fetch(`${nginx.url}${videoPath}`, { headers: { range: "bytes=0-7" } });
      expect(range.status).toBe(206);
      expect(Buffer.from(await range.arrayBuffer()).subarray(4, 8).toString("latin1")).toBe("ftyp");

      const client = new OpenAI({ baseURL: `${nginx.url}/api/compat`, apiKey: key, maxRetries: 0 });
      let streamed = "";
      for await (const chunk of await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "through the proxy" }], stream: true })) {
        streamed += chunk.choices[0]?.delta.content ?? "";
      }
      expect(streamed).toBe("through the proxy");
      // Chat chunks pass nginx as they come: the first arrives long before the last (250 ms apart upstream).
      const arrivals: number[] = [];
      for await (const chunk of await client.chat.completions.create({ model: "slow-gpt", messages: [{ role: "user", content: "x" }], stream: true })) {
        if (chunk.choices[0]?.delta.content) arrivals.push(performance.now());
      }
      expect(arrivals).toHaveLength(4);
      expect((arrivals.at(-1) ?? 0) - (arrivals[0] ?? 0)).toBeGreaterThan(500);

      // A stream that stays open: its first event must get through nginx at once, not when the stream ends.
      vendor.generation = { kind: "never" };
      const open = await fetch(`${nginx.url}/api/compat/videosGenerations`, { method: "POST", headers, body: JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 }) });
      const openId = ((await open.json()) as { data: { task_id: number } }).data.task_id;
      const first = await firstEventWhileOpen(nginx.url, key, openId);
      expect(first.open).toBe(true);
      expect(first.event).toMatch(/"status":"(pending|running)"/);
    });
  }
});
