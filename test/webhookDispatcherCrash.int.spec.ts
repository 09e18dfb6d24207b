import type { ChildProcess } from "node:child_process";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { killHard, startChildService, writeConfigFile } from "./helpers/childService.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, testConfig, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/** A dispatcher killed (SIGKILL) while a delivery is in flight: the next one delivers it, and the rest, in order. */
describe("webhook dispatcher crash", () => {
  let app: TestApp;
  let server: Server;
  const children: ChildProcess[] = [];
  const arrived: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
  const hanging: ServerResponse[] = [];
  let hangNext = 1;
  let url = "";

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        arrived.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
        if (hangNext > 0) {
          hangNext--;
          hanging.push(res); // never answered: the dispatcher dies waiting
        } else res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const tweak = (config: ReturnType<typeof testConfig>) => {
      config.webhooks.allowHttp = true;
      config.webhooks.allowPrivateAddresses = true;
      config.webhooks.timeoutMs = 30_000;
    };
    // Edge and runner here; the projector (with the dispatcher) in child processes that can be killed.
    // The scripted vendor (queued, running, then done at the third status call) instead of renders.
    const vendor = new ScriptedVendor();
    vendor.generation = { kind: "succeed", after: 3 };
    app = await startTestApp({ services: ["edge", "runner"], tweak, providers: () => vendor });
  });
  afterAll(async () => {
    for (const child of children) await killHard(child);
    for (const res of hanging) res.destroy();
    await app?.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("delivers the interrupted webhook again (same webhook-id) and the task's later ones after it", async () => {
    const env = { NATS_URL: app.natsUrl, REELAY_CONFIG: writeConfigFile(app.config) };
    const first = await startChildService(["projector"], env);
    children.push(first);
    const client = new VideoClient(app.baseUrl, await app.keyFor("crash-hooked", 100));
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4, callback_url: url });
    const taskId = created.body.data?.task_id as number;
    await expect.poll(() => arrived.length, { timeout: 10_000 }).toBe(1);
    await killHard(first);

    children.push(await startChildService(["projector"], env));
    await expect.poll(() => arrived.map((a) => (JSON.parse(a.body) as { type: string }).type).at(-1), { timeout: 20_000 }).toBe("video.task.success");
    const types = arrived.map((a) => (JSON.parse(a.body) as { type: string }).type);
    expect(types).toEqual(["video.task.pending", "video.task.pending", "video.task.running", "video.task.success"]);
    expect(arrived[1]?.headers["webhook-id"]).toBe(arrived[0]?.headers["webhook-id"]);
    expect(arrived[0]?.headers["webhook-id"]).toBe(`task-${taskId}-v1`);
  });
});
