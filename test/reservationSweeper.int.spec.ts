import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SubmitVideoTask } from "../contracts/videoTask.ts";
import { LEGACY_WORK } from "../infra/jetstreamLayout.ts";
import { firstTaskEvent } from "../machines/videoTaskDecider.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { sampleJob } from "./helpers/fixtures.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

describe("reservations whose task never came to be", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ tweak: (config) => (config.runner.reservationSweepMs = 300) });
  });
  afterAll(async () => app?.stop());

  it("are released after two sweeps when the task has no job and no events (an edge died in between)", async () => {
    await app.keyFor("orphaned", 10);
    await app.ledger.execute("orphaned", { type: "reserve", taskId: 987_654, amountMicros: 5_009_400 });
    await expect.poll(async () => (await app.ledger.current("orphaned")).reservedMicros, { timeout: 10_000 }).toBe(0);
    const released = (await readAccountHistory(app.nats.js, app.nats.jsm, "orphaned")).map((e) => e.event).filter((e) => e.type === "ReservationReleased");
    expect(released).toEqual([expect.objectContaining({ data: { taskId: 987_654, reservedMicros: 5_009_400, reason: "the task was never queued" } })]);
    expect((await app.ledger.current("orphaned")).balanceMicros).toBe(10_000_000);
  });

  it("are left alone while the task waits for a runner", async () => {
    await app.keyFor("queued", 10);
    const taskId = 987_655;
    await app.ledger.execute("queued", { type: "reserve", taskId, amountMicros: 5_009_400 });
    // A task no runner here can take (its provider is unknown): its first event is handed back every 5 s.
    const deadlineAt = new Date(Date.now() + 60_000).toISOString();
    const job = { ...sampleJob, provider: "elsewhere" };
    await new TaskLog(app.nats.js, app.nats.jsm).appendFirst(taskId, firstTaskEvent({ taskId, account: "queued", job, ignoredFields: [], deadlineAt }));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect((await app.ledger.current("queued")).reservations.get(taskId)).toBe(5_009_400);
  });

  it("are left alone while an older reelay's job waits on its WORK queue", async () => {
    await app.keyFor("legacy-queued", 10);
    const taskId = 987_656;
    await app.ledger.execute("legacy-queued", { type: "reserve", taskId, amountMicros: 5_009_400 });
    // A WORK stream with no consumer: the job stays there, as it would until runners drain it.
    await app.nats.jsm.streams.add({ name: LEGACY_WORK.stream, subjects: ["work.video.>"], allow_direct: true });
    const job: SubmitVideoTask = {
      type: "SubmitVideoTask",
      taskId,
      account: "legacy-queued",
      job: sampleJob,
      ignoredFields: [],
      receivedAt: new Date().toISOString(),
    };
    await app.nats.js.publish(LEGACY_WORK.subject(taskId), JSON.stringify(job));
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect((await app.ledger.current("legacy-queued")).reservations.get(taskId)).toBe(5_009_400);
  });
});
