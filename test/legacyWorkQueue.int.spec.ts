import { AckPolicy } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientReference, taskSubject, type SubmitVideoTask, type TaskEvent } from "../contracts/videoTask.ts";
import { CONSUMERS, ensureJetStreamLayout, LEGACY_WORK, STREAMS } from "../infra/jetstreamLayout.ts";
import { startRunner } from "../services/runner/main.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { sampleJob } from "./helpers/fixtures.ts";
import { silentLog, startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * A store an older reelay used: its edges queued jobs on WORK and its runners wrote every event of a task
 * on `tasks.<id>`. After the upgrade, runners run what is left there, once each, and the money is settled.
 */
describe("jobs an older reelay left on its WORK queue", () => {
  let app: TestApp;
  const vendor = new ScriptedVendor();
  let stopRunner: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    app = await startTestApp({ services: ["projector"] });
  });
  afterAll(async () => {
    await stopRunner?.();
    await app?.stop();
  });

  const job = (taskId: number): SubmitVideoTask => ({
    type: "SubmitVideoTask",
    taskId,
    account: "upgraded",
    job: sampleJob,
    ignoredFields: [],
    receivedAt: new Date().toISOString(),
  });
  /** An event as the older runner wrote it: on `tasks.<id>`, whatever its version. */
  const legacyEvent = (taskId: number, version: number, event: Omit<TaskEvent, "meta">) =>
    app.nats.js.publish(taskSubject(taskId), JSON.stringify({ ...event, meta: { schema: 1, taskId, version, at: new Date().toISOString() } }));

  it("are run once each: a queued one through the task log, one under way from where it was", { timeout: 30_000 }, async () => {
    await app.keyFor("upgraded", 100);
    const { jsm, js } = app.nats;
    // The older layout: WORK, its runners consumer, and no TASKS consumer for runners yet.
    await jsm.streams.add({ name: LEGACY_WORK.stream, subjects: ["work.video.>"], retention: "workqueue", allow_direct: true });
    await jsm.consumers.add(LEGACY_WORK.stream, { durable_name: LEGACY_WORK.durable, ack_policy: AckPolicy.Explicit, ack_wait: 2_000_000_000 });
    await jsm.consumers.delete(STREAMS.tasks.name, CONSUMERS.runners);
    const [queued, underWay] = [501, 502];
    for (const taskId of [queued, underWay]) await app.ledger.execute("upgraded", { type: "reserve", taskId, amountMicros: 5_009_400 });
    // Task 502 was under way: submitted upstream and accepted there, by a runner that is gone now.
    const { providerTaskId } = await vendor.submit({ taskId: underWay, job: sampleJob, clientReference: clientReference(underWay), signal: new AbortController().signal });
    const deadlineAt = new Date(Date.now() + 60_000).toISOString();
    await legacyEvent(underWay, 1, { type: "TaskSubmitted", data: { account: "upgraded", job: sampleJob, ignoredFields: [], deadlineAt, clientReference: clientReference(underWay) } });
    await legacyEvent(underWay, 2, { type: "UpstreamAccepted", data: { providerTaskId, channel: sampleJob.provider } });
    for (const taskId of [queued, underWay]) await js.publish(LEGACY_WORK.subject(taskId), JSON.stringify(job(taskId)));

    // The upgraded reelay starts: its layout adds the runners' consumer on TASKS (from now on), and a runner.
    await ensureJetStreamLayout(app.nats.nc, jsm, { replicas: 1, leaseMs: app.config.runner.leaseMs });
    stopRunner = (await startRunner(app.nats, app.config, silentLog, () => vendor)).stop;

    const taskLog = new TaskLog(js, jsm);
    const typesOf = async (taskId: number) => (await taskLog.read(taskId)).events.map((event) => event.type);
    await expect.poll(() => typesOf(queued), { timeout: 10_000 }).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationSucceeded"]);
    await expect.poll(() => typesOf(underWay), { timeout: 10_000 }).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationSucceeded"]);
    // One upstream task each: the one under way was asked about, not submitted again.
    expect(vendor.submits).toHaveLength(2);
    await expect.poll(async () => (await app.ledger.current("upgraded")).reservedMicros, { timeout: 10_000 }).toBe(0);
    expect((await jsm.streams.info(LEGACY_WORK.stream)).state.messages).toBe(0);
  });
});
