import { execFile } from "node:child_process";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhookSecrets } from "../services/webhooks/webhookSecrets.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;

interface Delivery {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A customer's webhook endpoint: records what arrives and answers 500 to the first `failNext` requests. */
async function startReceiver(): Promise<{ url: string; deliveries: Delivery[]; failNext: { count: number }; stop(): Promise<void> }> {
  const deliveries: Delivery[] = [];
  const failNext = { count: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      if (failNext.count > 0) {
        failNext.count--;
        res.writeHead(500).end("down for maintenance");
      } else res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks/reelay?token=abc`, deliveries, failNext, stop: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** Task status changes POSTed to a create's callback_url, signed as Standard Webhooks says. */
describe("webhooks", () => {
  let app: TestApp;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let client: VideoClient;
  const account = "hooked";

  beforeAll(async () => {
    receiver = await startReceiver();
    // The scripted vendor (queued, running, then done at the third status call): this file is about deliveries.
    const vendor = new ScriptedVendor();
    vendor.generation = { kind: "succeed", after: 3 };
    app = await startTestApp({
      providers: () => vendor,
      tweak: (config) => {
        config.webhooks.allowHttp = true;
        config.webhooks.allowPrivateAddresses = true;
        config.webhooks.firstBackoffMs = 50;
        config.webhooks.maxBackoffMs = 200;
      },
    });
    client = new VideoClient(app.baseUrl, await app.keyFor(account, 100));
  });
  afterAll(async () => {
    await app?.stop();
    await receiver?.stop();
  });

  const verified = (secret: string, delivery: Delivery) =>
    new Webhook(secret).verify(delivery.body, {
      "webhook-id": String(delivery.headers["webhook-id"]),
      "webhook-timestamp": String(delivery.headers["webhook-timestamp"]),
      "webhook-signature": String(delivery.headers["webhook-signature"]),
    }) as { type: string; data: Record<string, unknown> };

  it("delivers pending, running and success in order, signed; a failing receiver gets retries; the log shows them", async () => {
    const secret = await new WebhookSecrets(app.nats.webhookSecrets).secretOf(account);
    receiver.failNext.count = 2;
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4, callback_url: receiver.url });
    expect(created.status).toBe(200);
    const taskId = created.body.data?.task_id as number;
    const final = await client.waitForFinal(taskId, 30_000);
    await expect.poll(() => receiver.deliveries.filter((d) => d.body.includes('"success"')).length, { timeout: 10_000 }).toBe(1);

    const payloads = receiver.deliveries.map((d) => verified(secret, d));
    // Two failed attempts of the first event, then each status once, in order.
    expect(payloads.map((p) => p.type)).toEqual(["video.task.pending", "video.task.pending", "video.task.pending", "video.task.running", "video.task.success"]);
    expect(new Set(receiver.deliveries.slice(0, 3).map((d) => d.headers["webhook-id"])).size).toBe(1);
    // The same object the query answers; video addresses are built from REELAY_PUBLIC_URL (unset here: localhost).
    const { video_url: hooked, ...rest } = payloads.at(-1)?.data ?? {};
    const { video_url: queried, ...queriedRest } = final.body.data ?? {};
    expect(rest).toEqual(queriedRest);
    expect(new URL(String(hooked)).pathname).toBe(new URL(String(queried)).pathname);
    expect(payloads[0]?.data).toMatchObject({ task_id: taskId, status: "pending" });

    const log = await promisify(execFile)(process.execPath, [CLI, "webhooks", "log", "--account", account], { env: { ...process.env, NATS_URL: app.natsUrl } });
    const lines = log.stdout.trim().split("\n");
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/task \d+\tvideo\.task\.pending\tattempt 1\tfailed\tHTTP 500/);
    expect(lines.at(-1)).toMatch(/video\.task\.success\tattempt 1\tdelivered\tHTTP 204/);
    // The receiver's token in the query string never reaches the log.
    expect(log.stdout).not.toMatch(/token=abc/);
  });

  it("signs with both secrets for a day after a rotation, so receivers can switch over", async () => {
    const secrets = new WebhookSecrets(app.nats.webhookSecrets);
    const old = await secrets.secretOf(account);
    const rotated = await secrets.rotate(account);
    await new Promise((resolve) => setTimeout(resolve, 1100)); // dispatchers re-read secrets after a second
    const before = receiver.deliveries.length;
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4, callback_url: receiver.url });
    await expect.poll(() => receiver.deliveries.length, { timeout: 10_000 }).toBeGreaterThan(before);
    const delivery = receiver.deliveries[before] as Delivery;
    expect(String(delivery.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    expect(verified(old, delivery).data).toMatchObject({ task_id: created.body.data?.task_id });
    expect(verified(rotated, delivery).data).toMatchObject({ task_id: created.body.data?.task_id });
  });

  it("refuses a callback_url that is not an http(s) URL, naming the field", async () => {
    for (const bad of ["ftp://example.com/hook", "not a url", "https://user:pw@example.com/hook"]) {
      const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", callback_url: bad });
      expect(created.status).toBe(400);
      expect(created.body.msg).toMatch(/callback_url/);
    }
  });
});
