import type { JsMsg } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { hourKey } from "../contracts/taskStats.ts";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import type { TaskLogEntry } from "../services/shared/taskLog.ts";
import { setTimeout as sleep } from "node:timers/promises";
import { STATS_QUIET_MS, STATS_WRITE_BEHIND_MS, TaskStatsReactor } from "../services/tasks/taskStats.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";
import { silentLog } from "./helpers/testApp.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

const at = "2031-02-03T04:05:06.000Z";
const submitted = (taskId: number): NewTaskEvent => ({ type: "TaskSubmitted", data: { account: "acme", job, ignoredFields: [], deadlineAt: at, clientReference: `reelay-task-${taskId}` } });
/** Task `taskId` submitted, at stream sequence `seq` (the reactor never reads the message itself). */
const entry = (taskId: number, seq: number): TaskLogEntry => ({
  event: { ...submitted(taskId), meta: { schema: 1, taskId, version: 1, at } } as TaskEvent,
  seq,
  account: "acme",
  msg: {} as JsMsg,
});

describe("task counters, written behind", () => {
  const suite = natsPerSuite("stats-write-behind", 2000);
  const created = async () => ((await suite.nats.taskStats.get(hourKey(at)))?.json() as { created: number } | undefined)?.created;

  it("given batches in quick succession, when their writes are kept, then each document was written once with their sum", async () => {
    const stats = new TaskStatsReactor(suite.nats, silentLog);
    const revisionBefore = (await suite.nats.taskStats.status()).values;
    // Taken before the first batch, whose changes start the hold: under load the steps below take time of their own.
    const heldSince = performance.now();
    const first = await stats.handleEntries([entry(1, 1), entry(2, 2)]);
    const second = await stats.handleEntries([entry(3, 3)]);
    // Nothing is written while the changes are held.
    expect(await created()).toBeUndefined();
    await Promise.all([first.durable, second.durable]);
    expect(performance.now() - heldSince).toBeGreaterThanOrEqual(STATS_QUIET_MS - 20);
    expect(await created()).toBe(3);
    // status, hour and day: three documents, one write each for the two batches.
    expect((await suite.nats.taskStats.status()).values - revisionBefore).toBe(3);
    await stats.stop();
  });

  it("given batches that keep coming for longer than the period, then each document is written about once per period, not once per batch", async () => {
    const stats = new TaskStatsReactor(suite.nats, silentLog);
    const writesSoFar = async () => (await suite.nats.jsm.streams.info("KV_task_stats")).state.last_seq;
    const before = await writesSoFar();
    // Another hour and account than the other specs', whose counts they check.
    const elsewhere = (taskId: number): TaskLogEntry => {
      const { event, ...rest } = entry(taskId, taskId);
      return { ...rest, account: "busy", event: { ...event, data: { ...event.data, account: "busy" }, meta: { ...event.meta, at: "2031-02-03T09:05:06.000Z" } } as TaskEvent };
    };
    const durables: Array<Promise<void>> = [];
    const started = performance.now();
    // A batch every 50 ms (well inside the quiet time) for 1.5 periods: about 30 batches.
    for (let i = 0; performance.now() - started < STATS_WRITE_BEHIND_MS * 1.5; i++) {
      durables.push((await stats.handleEntries([elsewhere(100 + i)])).durable);
      await sleep(50);
    }
    await Promise.all(durables);
    // status, hour and day: three documents per write; one write at the period, one after the last batch (a busy
    // machine's late timer may add one more), never one per batch.
    const writes = ((await writesSoFar()) - before) / 3;
    expect(writes).toBeGreaterThanOrEqual(2);
    expect(writes).toBeLessThanOrEqual(4);
    await stats.stop();
  });

  it("given a batch handed over again (another reactor failed), when it is written, then nothing counts twice", async () => {
    const stats = new TaskStatsReactor(suite.nats, silentLog);
    const batch = [entry(4, 4), entry(5, 5)];
    const once = await stats.handleEntries(batch);
    const again = await stats.handleEntries(batch);
    await Promise.all([once.durable, again.durable]);
    expect(await created()).toBe(5);
    // A new process meeting the same events (a crash before the acknowledgement): the documents' sequence skips them.
    const restarted = new TaskStatsReactor(suite.nats, silentLog);
    await (await restarted.handleEntries([...batch, entry(6, 6)])).durable;
    expect(await created()).toBe(6);
    await Promise.all([stats.stop(), restarted.stop()]);
  });

  it("when stopping, what is held is written at once", async () => {
    const stats = new TaskStatsReactor(suite.nats, silentLog);
    const { durable } = await stats.handleEntries([entry(7, 7)]);
    const stoppedAt = performance.now();
    await stats.stop();
    await durable;
    expect(performance.now() - stoppedAt).toBeLessThan(STATS_WRITE_BEHIND_MS);
    expect(await created()).toBe(7);
  });
});
