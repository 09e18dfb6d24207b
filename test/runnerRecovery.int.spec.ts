import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { killHard, startChildService, writeConfigFile } from "./helpers/childService.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";

/** Every task's history must be one clean lifecycle: no step recorded twice, versions without gaps. */
function expectOneCleanLifecycle(events: TaskEvent[]): void {
  expect(events.map((e) => e.type)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationStarted", "GenerationSucceeded"]);
  expect(events.map((e) => e.meta.version)).toEqual([1, 2, 3, 4]);
}

describe("runners that die", () => {
  let app: TestApp;
  let client: VideoClient;
  let configPath: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    // No runner in this process: the runners are child processes this test can kill.
    app = await startTestApp({
      services: ["edge", "projector"],
      tweak: (config) => (config.runner.leaseMs = 1500),
    });
    client = new VideoClient(app.baseUrl, await app.keyFor("recovery"));
    configPath = writeConfigFile(app.config);
  });
  afterAll(async () => {
    await Promise.all(children.map(killHard));
    await app?.stop();
  });

  const runner = async () => {
    // Each task takes about a second at the scripted vendor (16 status calls 50 ms apart).
    const child = await startChildService(["scripted-runner"], { NATS_URL: app.natsUrl, REELAY_CONFIG: configPath, SCRIPTED_STATUS_CALLS: "16" });
    children.push(child);
    return child;
  };

  it("loses no task and runs none twice when a runner is killed with SIGKILL mid-work", async () => {
    const doomed = await runner();
    await runner();
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) {
      const created = await client.create({ model: "VideoModel-2.0-mini", prompt: `task ${i}`, duration: 4 });
      expect(created.status).toBe(200);
      ids.push(created.body.data?.task_id as number);
    }
    // Tasks are at the upstream now: kill one runner outright, then bring a new one.
    await killHard(doomed);
    await runner();

    const finals = await Promise.all(ids.map((id) => client.waitForFinal(id, 90_000)));
    for (const final of finals) expect(final.body).toMatchObject({ code: 200, msg: "success" });
    // The killed runner really held work: some jobs were delivered more than once.
    const work = await app.nats.jsm.consumers.info(STREAMS.events.name, CONSUMERS.runners);
    expect(work.delivered.consumer_seq).toBeGreaterThan(ids.length);
    for (const id of ids) expectOneCleanLifecycle((await readTask(app.nats, id)).events);
  });

  it("a runner stopped with SIGTERM exits cleanly and hands its tasks back at once", async () => {
    // Only the runner about to be stopped holds work.
    await Promise.all(children.map(killHard));
    const stopping = await runner();
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "handed over", duration: 4 });
    const taskId = created.body.data?.task_id as number;
    const exit = new Promise<number | null>((resolve) => stopping.once("exit", (code) => resolve(code)));
    stopping.kill("SIGTERM");
    expect(await exit).toBe(0);
    await runner();
    const final = await client.waitForFinal(taskId, 30_000);
    expect(final.body.msg).toBe("success");
    expectOneCleanLifecycle((await readTask(app.nats, taskId)).events);
  });
});
