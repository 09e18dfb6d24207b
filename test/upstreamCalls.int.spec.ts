import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callUpstream } from "../services/runner/providers/httpAnswers.ts";
import { ProviderUnavailable } from "../services/runner/providers/types.ts";
import { freeLoopbackPort } from "../infra/natsServer.ts";

/** An upstream that answers what each path asks: what it received, a 429 with Retry-After, or nothing at all. */
function upstream(): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.url?.includes("/hang")) return;
      if (req.url?.includes("/huge")) {
        res.writeHead(200, { "content-type": "application/json" });
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        const more = () => (res.destroyed ? undefined : res.write(chunk, () => setImmediate(more)));
        return more();
      }
      res.writeHead(req.url?.includes("/busy") ? 429 : 200, { "content-type": "application/json", "retry-after": "3" });
      res.end(JSON.stringify({ method: req.method, url: req.url, body: Buffer.concat(chunks).toString(), authorization: req.headers.authorization }));
    });
  });
}

describe("upstream API calls (callUpstream: a pool per origin)", () => {
  let server: Server;
  let base: string;
  beforeAll(async () => {
    server = upstream();
    await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v3`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((closed) => server.close(closed));
  });

  const call = (url: string, options: Partial<Parameters<typeof callUpstream>[1]> = {}) =>
    callUpstream(url, { method: "GET", headers: {}, body: null, signal: new AbortController().signal, timeoutMs: 2_000, what: "GET /status", ...options });

  it("sends the method, path with its query, headers and body, and reads status, text and headers", async () => {
    const answer = await call(`${base}/tasks?id=7`, { method: "POST", headers: { authorization: "Bearer k" }, body: '{"a":1}' });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toEqual({ method: "POST", url: "/api/v3/tasks?id=7", body: '{"a":1}', authorization: "Bearer k" });
    expect(answer.headers["content-type"]).toBe("application/json");
  });

  it("hands an error answer back as it came (the adapter reads it), Retry-After included", async () => {
    const answer = await call(`${base}/busy`);
    expect(answer.status).toBe(429);
    expect(answer.headers["retry-after"]).toBe("3");
  });

  it("reuses one pool for many calls to one origin, in flight at once", async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, (_, index) => call(`${base}/tasks/${index}`)));
    expect(answers.map((answer) => JSON.parse(answer.text).url)).toEqual(Array.from({ length: 20 }, (_, index) => `/api/v3/tasks/${index}`));
  });

  it("makes no answer at all (a refused connection, a timeout, a bad address) passing: ProviderUnavailable naming the call", async () => {
    const closedPort = await freeLoopbackPort();
    await expect(call(`http://127.0.0.1:${closedPort}/status`)).rejects.toThrow(ProviderUnavailable);
    await expect(call(`http://127.0.0.1:${closedPort}/status`)).rejects.toThrow(/^GET \/status: /);
    await expect(call(`${base}/hang`, { timeoutMs: 200 })).rejects.toThrow(/GET \/status: UND_ERR_HEADERS_TIMEOUT/);
    await expect(call("not a url")).rejects.toThrow(ProviderUnavailable);
  });

  it("gives up an answer past 4 MiB as passing, without holding the rest (an upstream that never stopped was held whole)", async () => {
    const error = await call(`${base}/huge`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailable);
    expect((error as Error).message).toBe("GET /status: the upstream answered more than 4194304 bytes");
  });

  it("rethrows an abort as it is: the task ended, nothing is wrong with the upstream", async () => {
    const controller = new AbortController();
    const pending = call(`${base}/hang`, { signal: controller.signal });
    controller.abort(new Error("the task ended"));
    await expect(pending).rejects.toThrow("the task ended");
    await expect(pending).rejects.not.toThrow(ProviderUnavailable);
  });
});
