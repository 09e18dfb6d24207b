import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

describe("tasks that fail", () => {
  let app: TestApp;
  let slowApp: TestApp;
  let images: Server;
  let imagesUrl: string;

  beforeAll(async () => {
    images = createServer((_req, res) => res.writeHead(404).end("gone"));
    await new Promise<void>((resolve) => images.listen(0, "127.0.0.1", resolve));
    const address = images.address();
    imagesUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    app = await startTestApp();
    // Jobs wait 10 s in the queue but tasks may live only 1 s: every task times out.
    slowApp = await startTestApp({
      tweak: (config) => {
        for (const provider of Object.values(config.providers)) if (provider.kind === "local") provider.queueDelayMs = 10_000;
        config.limits.maxTaskMs = 1000;
      },
    });
  });
  afterAll(async () => {
    await Promise.all([app?.stop(), slowApp?.stop()]);
    images?.close();
  });

  it("a generation error ends the task failed: code 500, the reason, no data", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("acme"));
    const created = await client.create({ model: "VideoModel-2.0", prompt: "uses an image", duration: 4, image_url: `${imagesUrl}/missing.png` });
    expect(created.status).toBe(200);
    const final = await client.waitForFinal(created.body.data?.task_id as number);
    expect(final.status).toBe(500);
    expect(final.body.code).toBe(500);
    expect(final.body.msg).toMatch(/could not fetch image_url/);
    expect(final.body).not.toHaveProperty("data");
  });

  it("a task past its maximum time fails with a timeout reason", async () => {
    const client = new VideoClient(slowApp.baseUrl, await slowApp.keyFor("acme"));
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "never rendered in time", duration: 4 });
    const final = await client.waitForFinal(created.body.data?.task_id as number, 20_000);
    expect(final).toEqual({ status: 500, body: { code: 500, msg: "timed out: not finished within 1 second" } });
  });
});
