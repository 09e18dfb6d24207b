import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { killHard, startChildService, writeConfigFile, type ServiceChild } from "./helpers/childService.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, testConfig, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/** A dispatcher killed (SIGKILL) while a delivery is in flight: the next one delivers it, and the rest, in order. */
const ACCOUNT = "crash-hooked";

describe("webhook dispatcher crash", () => {
  let app: TestApp;
  let server: Server;
  const children: ServiceChild[] = [];
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
    const client = new VideoClient(app.baseUrl, await app.keyFor(ACCOUNT, 100));
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4, callback_url: url });
    const taskId = created.body.data?.task_id as number;
    await expect.poll(() => arrived.length, { timeout: 10_000 }).toBe(1);
    await killHard(first);

    const second = await startChildService(["projector"], env);
    children.push(second);
    try {
      await expect.poll(() => arrived.map((a) => (JSON.parse(a.body) as { type: string }).type).at(-1), { timeout: 20_000 }).toBe("video.task.success");
    } catch (error) {
      // Once in many CI runs (Node 22, 2026-11-26) the last webhook did not come: what there is to see.
      throw new Error(`${(error as Error).message}\n${await whereItStands(taskId, [first, second])}`, { cause: error });
    }
    // The interrupted webhook again, then the task's later ones in order. Once in 20 stressed runs (2026-11-28) success
    // overtook running, which waited behind a job finished here but not yet removed: where things stood, if again.
    const types = arrived.map((a) => (JSON.parse(a.body) as { type: string }).type);
    const expected = ["video.task.pending", "video.task.pending", "video.task.running", "video.task.success"];
    if (JSON.stringify(types) !== JSON.stringify(expected)) expect.fail(`${JSON.stringify(types)} arrived, ${JSON.stringify(expected)} expected\n${await whereItStands(taskId, [first, second])}`);
    expect(arrived[1]?.headers["webhook-id"]).toBe(arrived[0]?.headers["webhook-id"]);
    expect(arrived[0]?.headers["webhook-id"]).toBe(`task-${taskId}-v1`);
  });

  /** The deliveries, the jobs left, both consumers, the task's log and the projectors' warnings, for a failure's message. */
  async function whereItStands(taskId: number, projectors: readonly ServiceChild[]): Promise<string> {
    const { jsm } = app.nats;
    const jobs: string[] = [];
    const { state } = await jsm.streams.info(STREAMS.webhookJobs.name);
    for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
      const job = await jsm.streams.getMessage(STREAMS.webhookJobs.name, { seq }).catch(() => null);
      if (job) jobs.push(`${seq} ${job.string()}`);
    }
    const consumer = async (stream: string, durable: string) => {
      const info = await jsm.consumers.info(stream, durable);
      return JSON.stringify({ delivered: info.delivered, ack_floor: info.ack_floor, pending: info.num_pending, ack_pending: info.num_ack_pending, redelivered: info.num_redelivered, waiting: info.num_waiting });
    };
    const { events } = await new TaskLog(app.nats.js, jsm).read(ACCOUNT, taskId).catch(() => ({ events: [] }));
    const warnings = projectors.map((child, i) => `projector ${i + 1}:\n${child.output().split("\n").filter((line) => /"level":(40|50|60)/.test(line)).slice(-30).join("\n")}`);
    return [
      `arrived: ${arrived.map((a) => `${a.headers["webhook-id"]} ${(JSON.parse(a.body) as { type: string }).type}`).join(", ")}`,
      `jobs left: ${jobs.join("; ") || "none"}`,
      `consumer webhooks: ${await consumer(STREAMS.webhookJobs.name, CONSUMERS.webhooks)}`,
      `consumer reactors: ${await consumer(STREAMS.events.name, CONSUMERS.taskLogReactors)}`,
      `task log: ${events.map((e) => `v${e.meta.version} ${e.type}`).join(", ")}`,
      ...warnings,
    ].join("\n");
  }
});
