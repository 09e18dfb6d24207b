import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RequestError, TimeoutError } from "@nats-io/transport-node";
import OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { openAiError } from "../services/edge/http/openAiErrors.ts";
import { videoError } from "../services/edge/http/videoErrors.ts";
import { startEdge } from "../services/edge/main.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats } from "../services/shared/nats.ts";
import { silentLog, testConfig } from "./helpers/testApp.ts";

describe("infrastructure trouble answers 503, never 500", () => {
  it("maps NATS timeouts, wrapped or not, to 503 with Retry-After in both wire formats; anything else stays 500", () => {
    const toVideo = (error: unknown) => videoError(error, silentLog);
    for (const error of [new TimeoutError(), new RequestError("request failed", { cause: new TimeoutError() }), new Error("x", { cause: new TimeoutError() })]) {
      const video = toVideo(error);
      expect(video.status).toBe(503);
      expect(video.headers?.["retry-after"]).toMatch(/^\d+$/);
      expect(video.body).toEqual({ code: 503, msg: expect.stringContaining("temporarily unavailable") });
      const chat = openAiError(error, silentLog);
      expect(chat.status).toBe(503);
      expect(chat.headers?.["retry-after"]).toMatch(/^\d+$/);
      expect(chat.body.error).toMatchObject({ type: "server_error", code: "service_unavailable" });
    }
    expect(toVideo(new Error("a bug")).status).toBe(500);
  });

  describe("during a real NATS outage", () => {
    const dir = mkdtempSync(join(tmpdir(), "reelay-outage-503-"));
    let server: RunningNatsServer | undefined;
    const cleanups: Array<() => Promise<void>> = [];
    afterAll(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
      await server?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it("answers creates and chat with 503 and Retry-After at once while the edge knows NATS is away, and works again after", async () => {
      server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
      const port = Number(new URL(server.url).port);
      const config = testConfig((c) => (c.limits.submitWaitMs = 200));
      const nats = await connectNats(server.url, "outage-503-test", { replicas: 1, leaseMs: config.runner.leaseMs });
      cleanups.push(() => nats.nc.close());
      const ledger = new AccountLedger(nats);
      await ledger.execute("outage", { type: "open" });
      await ledger.execute("outage", { type: "credit", amountMicros: 100_000_000, creditId: "outage-credit" });
      const { key } = await new ApiKeyStore(nats.apiKeys).create("outage");
      const edge = await startEdge(nats, config, silentLog, { host: "127.0.0.1", port: 0, publicUrl: undefined });
      cleanups.push(() => edge.stop());
      const base = `http://127.0.0.1:${edge.port}`;
      const health = async () => (await fetch(`${base}/healthz`)).status;
      const create = () =>
        fetch(`${base}/api/compat/videosGenerations`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "during an outage", duration: 4 }),
        });
      await expect.poll(async () => (await create()).status, { timeout: 10_000 }).toBe(200);

      await server.stop();
      await expect.poll(health, { timeout: 10_000 }).toBe(503);
      const started = Date.now();
      const refused = await create();
      // At once: the request timeout it used to wait for is 5 s.
      expect(Date.now() - started).toBeLessThan(2500);
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(await refused.json()).toEqual({ code: 503, msg: expect.stringContaining("temporarily unavailable") });

      const chat = await fetch(`${base}/api/compat/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "hi" }] }),
      });
      expect(chat.status).toBe(503);
      expect(chat.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(await chat.json()).toEqual({
        error: { message: expect.stringContaining("temporarily unavailable"), type: "server_error", param: null, code: "service_unavailable" },
      });
      const client = new OpenAI({ baseURL: `${base}/api/compat`, apiKey: key, maxRetries: 0 });
      await expect(client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "hi" }] })).rejects.toMatchObject({ status: 503 });

      server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {}, port });
      await expect.poll(health, { timeout: 20_000 }).toBe(200);
      await expect.poll(async () => (await create()).status, { timeout: 10_000 }).toBe(200);
    });
  });
});
