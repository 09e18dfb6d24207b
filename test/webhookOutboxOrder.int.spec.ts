import type { JsMsg } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import { WebhookJob } from "../contracts/webhookJob.ts";
import { STREAMS, webhookJobSubject } from "../infra/jetstreamLayout.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { TaskLog, type TaskLogEntry } from "../services/shared/taskLog.ts";
import { TaskDirectory } from "../services/tasks/taskDirectory.ts";
import { WebhookOutbox } from "../services/webhooks/webhookOutbox.ts";
import { openTask } from "./helpers/openTask.ts";
import { startTestNats } from "./helpers/testNats.ts";

/**
 * Webhook jobs queue in the order of the task's log, even when the reactors' consumer hands a task's events
 * out of order: after a projector dies, its unacknowledged events come back a lease later, while the task's
 * newer events go to the next projector at once.
 */
describe("webhook outbox order", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  let taskLog: TaskLog;
  let ledger: AccountLedger;
  const callbackUrl = "https://hooks.example.com/reelay";
  const later: NewTaskEvent[] = [
    { type: "UpstreamAccepted", data: { providerTaskId: "up-1" } },
    { type: "GenerationStarted", data: {} },
    { type: "GenerationSucceeded", data: { video: { object: "v", bytes: 1, contentType: "video/mp4" }, durationSeconds: 5, resolution: "1280*720", totalTokens: 1 } },
  ];

  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "outbox-test", { replicas: 1, leaseMs: 5_000 });
    taskLog = new TaskLog(nats.js, nats.jsm);
    ledger = new AccountLedger(nats);
  });
  afterAll(async () => {
    await nats?.nc.close();
    await server?.stop();
  });

  /** Task `taskId` of `account` (with a callback URL unless told): opened, accepted, running, succeeded (versions 1–4). */
  async function taskThatSucceeded(account: string, taskId: number, options: { withCallback: boolean } = { withCallback: true }): Promise<TaskEvent[]> {
    const opening = await openTask(ledger, account, taskId, options.withCallback ? { callbackUrl } : {});
    const events: TaskEvent[] = [opening];
    let sequence = 0;
    for (const [index, event] of later.entries()) {
      const written = await taskLog.append(account, taskId, event, index + 2, sequence);
      events.push(written.event);
      sequence = written.sequence;
    }
    return events;
  }

  const entry = (account: string, event: TaskEvent): TaskLogEntry => ({ event, account, seq: 0, msg: { headers: undefined } as unknown as JsMsg });

  async function queuedJobs(taskId: number): Promise<Array<Pick<WebhookJob, "version" | "status">>> {
    const jobs: Array<Pick<WebhookJob, "version" | "status">> = [];
    for (let seq = 0; ; ) {
      const msg = await nats.jsm.direct.getMessage(STREAMS.webhookJobs.name, { seq: seq + 1, next_by_subj: webhookJobSubject(taskId) });
      if (!msg) return jobs;
      const { version, status } = WebhookJob.parse(msg.json());
      jobs.push({ version, status });
      seq = msg.seq;
    }
  }

  it("given a projector that saw the opening but not the start (another took it and died), when the success comes first, then the start's job is queued before it and the start's late batch adds nothing", async () => {
    const [opening, accepted, started, succeeded] = await taskThatSucceeded("acme", 11);
    const outbox = new WebhookOutbox(nats.js, new TaskDirectory(), taskLog);
    await outbox.handleEntries([entry("acme", opening!)]);
    // The dead projector's batch (accepted, started) is handed over only after its lease.
    await outbox.handleEntries([entry("acme", succeeded!)]);
    await outbox.handleEntries([entry("acme", accepted!), entry("acme", started!)]);
    expect(await queuedJobs(11)).toEqual([
      { version: 1, status: "pending" },
      { version: 3, status: "running" },
      { version: 4, status: "success" },
    ]);
  });

  /** The task log, counting its reads. */
  function countingReads(): { log: TaskLog; reads: () => number } {
    let reads = 0;
    const log = Object.assign(Object.create(taskLog) as TaskLog, { read: (...args: Parameters<TaskLog["read"]>) => (reads++, taskLog.read(...args)) });
    return { log, reads: () => reads };
  }

  it("given a projector that meets a task only at its success (a restart), then the earlier status changes are queued first, each once, from one read of its log", async () => {
    const [opening, , , succeeded] = await taskThatSucceeded("acme", 12);
    await new WebhookOutbox(nats.js, new TaskDirectory(), taskLog).handleEntries([entry("acme", opening!)]);
    const restarted = countingReads();
    await new WebhookOutbox(nats.js, new TaskDirectory(), restarted.log).handleEntries([entry("acme", succeeded!)]);
    expect((await queuedJobs(12)).map((job) => job.version)).toEqual([1, 3, 4]);
    expect(restarted.reads()).toBe(1);
  });

  it("given a projector that saw every event in order, then no status change reads the task's log", async () => {
    const events = await taskThatSucceeded("acme", 13);
    const counting = countingReads();
    const directory = new TaskDirectory();
    directory.learn(events[0]!);
    const inOrder = new WebhookOutbox(nats.js, directory, counting.log);
    for (const event of events) await inOrder.handleEntries([entry("acme", event)]);
    expect(counting.reads()).toBe(0);
    expect((await queuedJobs(13)).map((job) => job.version)).toEqual([1, 3, 4]);
  });

  it("given the events as the reactors get them (no acceptance; the start carries its copy), then no status change reads the task's log", async () => {
    const opening = await openTask(ledger, "acme", 14, { callbackUrl });
    const accepted = await taskLog.append("acme", 14, { type: "UpstreamAccepted", data: { providerTaskId: "up-1" } }, 2, 0);
    const started = await taskLog.append("acme", 14, { type: "GenerationStarted", data: { accepted: { providerTaskId: "up-1" } } }, 3, accepted.sequence);
    const succeeded = await taskLog.append("acme", 14, later[2]!, 4, started.sequence);
    const counting = countingReads();
    const directory = new TaskDirectory();
    directory.learn(opening);
    const reactors = new WebhookOutbox(nats.js, directory, counting.log);
    for (const event of [opening, started.event, succeeded.event]) await reactors.handleEntries([entry("acme", event)]);
    expect(counting.reads()).toBe(0);
    expect((await queuedJobs(14)).map((job) => job.version)).toEqual([1, 3, 4]);
  });

  it("given a task without a callback URL whose opening passed, then none of its status changes reads its log or queues a job", async () => {
    const events = await taskThatSucceeded("acme", 15, { withCallback: false });
    const counting = countingReads();
    const directory = new TaskDirectory();
    const outbox = new WebhookOutbox(nats.js, directory, counting.log);
    for (const event of events) {
      directory.learn(event);
      await outbox.handleEntries([entry("acme", event)]);
    }
    expect(counting.reads()).toBe(0);
    expect(await queuedJobs(15)).toEqual([]);
  });
});
