import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { ConcurrencyError } from "../services/shared/errors.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { openTask } from "./helpers/openTask.ts";
import { startTestNats } from "./helpers/testNats.ts";

/**
 * A task's later events are on `acct.A.task.N.state` and `acct.A.task.N.upstream` (contracts/videoTask.ts):
 * one fenced sequence, read with the last message of each subject, and the reactors are never handed the
 * upstream's acceptance.
 */
describe("task log layout", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  let taskLog: TaskLog;
  let ledger: AccountLedger;
  let watcher: NatsConnection;
  const accepted: NewTaskEvent = { type: "UpstreamAccepted", data: { providerTaskId: "up-1", channel: "c1" } };
  const started: NewTaskEvent = { type: "GenerationStarted", data: { accepted: { providerTaskId: "up-1", channel: "c1" } } };
  const progressed = (progress: number): NewTaskEvent => ({ type: "GenerationProgressed", data: { progress } });

  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "task-log-layout-test", { replicas: 1, leaseMs: 5_000 });
    taskLog = new TaskLog(nats.js, nats.jsm);
    ledger = new AccountLedger(nats);
    watcher = await connect({ servers: server.url });
  });
  afterAll(async () => {
    await watcher?.close();
    await nats?.nc.close();
    await server?.stop();
  });

  /** Appends `events` after the opening (versions 2, 3, …), each fenced on the one before. */
  async function append(account: string, taskId: number, events: NewTaskEvent[]): Promise<number> {
    let sequence = 0;
    for (const [index, event] of events.entries()) sequence = (await taskLog.append(account, taskId, event, index + 2, sequence)).sequence;
    return sequence;
  }

  /** Direct gets on EVENTS made while `read` runs. */
  async function directGetsDuring(read: () => Promise<unknown>): Promise<number> {
    let gets = 0;
    const subscription = watcher.subscribe(`$JS.API.DIRECT.GET.${STREAMS.events.name}.>`, { callback: () => void gets++ });
    const plain = watcher.subscribe(`$JS.API.DIRECT.GET.${STREAMS.events.name}`, { callback: () => void gets++ });
    await watcher.flush();
    await read();
    await nats.nc.flush();
    await watcher.flush();
    subscription.unsubscribe();
    plain.unsubscribe();
    return gets;
  }

  it("given a task opened, accepted and running, when its log is read, then one direct get brings its events in order", async () => {
    await openTask(ledger, "acme", 1);
    const last = await append("acme", 1, [accepted, started]);
    let history: { events: TaskEvent[]; lastSequence: number } | undefined;
    expect(await directGetsDuring(async () => (history = await taskLog.read("acme", 1)))).toBe(1);
    expect(history?.events.map((event) => [event.type, event.meta.version])).toEqual([
      ["TaskSubmitted", 1],
      ["UpstreamAccepted", 2],
      ["GenerationStarted", 3],
    ]);
    expect(history?.lastSequence).toBe(last);
  });

  it("given a task with several state events, when its log is read, then all of them come, in order, with one batch of its state subject more", async () => {
    await openTask(ledger, "acme", 2);
    await append("acme", 2, [accepted, started, progressed(30), progressed(60)]);
    let events: TaskEvent[] = [];
    expect(await directGetsDuring(async () => ({ events } = await taskLog.read("acme", 2)))).toBe(2);
    expect(events.map((event) => event.meta.version)).toEqual([1, 2, 3, 4, 5]);
  });

  it("given an unknown task, when its log is read, then it is empty", async () => {
    expect(await taskLog.read("acme", 99)).toEqual({ events: [], lastSequence: 0 });
  });

  it("when an append is fenced on a sequence that the acceptance (on the other subject) has passed, then it is refused", async () => {
    await openTask(ledger, "acme", 3);
    await append("acme", 3, [accepted]);
    await expect(taskLog.append("acme", 3, started, 2, 0)).rejects.toBeInstanceOf(ConcurrencyError);
  });

  it("the reactors' consumer is handed the opening and the state events, never the acceptance", async () => {
    const jsm = await jetstreamManager(watcher);
    const before = (await jsm.consumers.info(STREAMS.events.name, CONSUMERS.taskLogReactors)).num_pending;
    await openTask(ledger, "zeta", 4);
    await append("zeta", 4, [accepted, started]);
    expect((await jsm.consumers.info(STREAMS.events.name, CONSUMERS.taskLogReactors)).num_pending - before).toBe(2);
  });
});
