import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskView } from "../contracts/videoTask.ts";
import { auditProjection } from "../services/shared/projectionAudit.ts";
import { taskViewProjection } from "../services/tasks/taskViewProjection.ts";
import { queryReply } from "../services/edge/video/taskReplies.ts";
import { startProjector } from "../services/projector/main.ts";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { silentLog, startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

describe("task views rebuilt from the log", () => {
  let app: TestApp;
  // An instant vendor: this is about replaying the log, not rendering.
  const vendor = new ScriptedVendor();
  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor });
  });
  afterAll(async () => app?.stop());

  it("replaying TASKS into an empty bucket gives the same answers as the live views", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("auditor"));
    const ids: number[] = [];
    for (const prompt of ["one", "two", "three"]) {
      ids.push((await client.create({ model: "VideoModel-2.0-mini", prompt, duration: 4 })).body.data?.task_id as number);
    }
    vendor.generation = { kind: "fail", after: 1, reason: "the reference image could not be fetched" };
    ids.push((await client.create({ model: "VideoModel-2.0", prompt: "bad ref", duration: 4 })).body.data?.task_id as number);
    const liveAnswers = await Promise.all(ids.map((id) => client.waitForFinal(id)));
    // The projector may still be applying the last event when the reader saw it folded from the log.
    await expect.poll(async () => (await app.nats.taskViews.get(String(ids.at(-1))))?.json<TaskView>().status, { timeout: 5000 }).toBe("failed");

    const fresh = await new Kvm(app.nats.js).create(`task_views_rebuild_${Date.now()}`);
    const audit = await auditProjection(app.nats, taskViewProjection, app.nats.taskViews, fresh);
    expect(audit.differences).toEqual([]);
    expect(audit.documents).toBe(ids.length);

    for (const [index, id] of ids.entries()) {
      const rebuilt = TaskView.parse((await fresh.get(String(id)))?.json());
      const answer = (() => {
        try {
          return queryReply(rebuilt, app.baseUrl);
        } catch (error) {
          return { status: 500, body: JSON.stringify({ code: 500, msg: (error as Error).message }) };
        }
      })();
      expect(JSON.parse(String(answer.body))).toEqual(liveAnswers[index]?.body);
    }
  });

  it("notices a live view that drifted from the log", async () => {
    let first = "";
    for await (const key of await app.nats.taskViews.keys()) first ||= key;
    const entry = await app.nats.taskViews.get(String(first));
    await app.nats.taskViews.put(String(first), JSON.stringify({ ...entry?.json<TaskView>(), status: "running" }));
    const audit = await auditProjection(app.nats, taskViewProjection, app.nats.taskViews);
    expect(audit.differences.map((d) => d.key)).toEqual([first]);
  });
});

describe("task views are stored once final", () => {
  let app: TestApp;
  const vendor = new ScriptedVendor();
  beforeAll(async () => {
    // No projector of the app's own: the test starts and stops one around a task that is running.
    app = await startTestApp({ providers: () => vendor, services: ["edge", "runner"], tweak: (config) => (config.limits.maxTaskMs = 1_500) });
  });
  afterAll(async () => app?.stop());

  const caughtUp = async (): Promise<boolean> => {
    const info = await app.nats.jsm.consumers.info(STREAMS.events.name, CONSUMERS.taskLogReactors);
    return info.num_pending === 0 && info.num_ack_pending === 0;
  };

  it("a running task has no stored view; a projector started after it ended folds it from the log and stores the final one", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("unstored"));
    vendor.generation = { kind: "never" };
    const first = await startProjector(app.nats, app.config, silentLog);
    const id = (await client.create({ model: "VideoModel-2.0-mini", prompt: "slow", duration: 4 })).body.data?.task_id as number;
    await expect.poll(async () => (await client.query(id)).body.data?.status, { timeout: 5000 }).toBe("running");
    await expect.poll(caughtUp, { timeout: 5000 }).toBe(true);
    expect(await app.nats.taskViews.get(String(id))).toBeNull();
    await first.stop();

    // The runner fails the task at maxTaskMs while no projector runs; the next one starts with nothing in memory.
    const final = await client.waitForFinal(id, 10_000);
    expect(final.body.msg).toMatch(/timed out/);
    const second = await startProjector(app.nats, app.config, silentLog);
    try {
      await expect.poll(async () => (await app.nats.taskViews.get(String(id)))?.json<TaskView>().status, { timeout: 5000 }).toBe("failed");
      const stored = TaskView.parse((await app.nats.taskViews.get(String(id)))?.json());
      expect(stored).toMatchObject({ taskId: id, status: "failed", failureReason: expect.stringMatching(/timed out/) });
    } finally {
      await second.stop();
    }
  });
});
