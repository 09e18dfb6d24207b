import type { JsMsg } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent, TaskView } from "../contracts/videoTask.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import type { TaskLogEntry } from "../services/shared/taskLog.ts";
import { listAccountTasks, TaskIndexer, taskIndexKey } from "../services/tasks/taskIndex.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";
import { startTestNats } from "./helpers/testNats.ts";

const at = "2031-02-03T04:05:06.000Z";
const entry = (event: Omit<TaskEvent, "meta">, taskId: number, version: number): TaskLogEntry => ({
  event: { ...event, meta: { schema: 1, taskId, version, at } } as TaskEvent,
  seq: taskId * 10 + version,
  account: "account" in event.data && typeof event.data.account === "string" ? event.data.account : "acme",
  msg: {} as JsMsg,
});
const submitted = (taskId: number, account: string) =>
  entry({ type: "TaskSubmitted", data: { account, job, ignoredFields: [], deadlineAt: at, clientReference: `reelay-task-${taskId}` } } as Omit<TaskEvent, "meta">, taskId, 1);
const view = (taskId: number, account: string, status: TaskView["status"]): TaskView =>
  ({ taskId, account, model: job.model, status, pricePerMillionTokens: 1, createdAt: at, updatedAt: at, version: 1 }) as TaskView;

/** `account_tasks`: each task's key written once, at create; lists filter on the views the caller reads. */
describe("the account task index", () => {
  let server: { url: string; stop(): Promise<void> };
  let nats: Nats;
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "task-index", { replicas: 1, leaseMs: 2000 });
  });
  afterAll(async () => {
    await nats?.nc.close();
    await server?.stop();
  });

  it("given a task's whole life in the log, then its key is written once, at create", async () => {
    const indexer = new TaskIndexer(nats);
    await indexer.handleEntries([submitted(7, "once")]);
    await indexer.handleEntries([
      entry({ type: "UpstreamAccepted", data: { providerTaskId: "up-7" } }, 7, 2),
      entry({ type: "GenerationStarted", data: {} }, 7, 3),
      entry({ type: "GenerationFailed", data: { reason: "blocked", stage: "generation" } }, 7, 4),
    ]);
    const revisions: number[] = [];
    for await (const kept of await nats.accountTasks.history({ key: taskIndexKey("once", 7) })) revisions.push(kept.revision);
    expect(revisions).toHaveLength(1);
  });

  it("pages newest or oldest first by id, filters on the current view (reading ahead past non-matching ones) and never lists another account's task", async () => {
    const indexer = new TaskIndexer(nats);
    const views = new Map<number, TaskView>();
    // 100 tasks of `pager`, every tenth one running, and one of another account in between.
    for (let id = 101; id <= 200; id++) views.set(id, view(id, "pager", id % 10 === 0 ? "running" : "success"));
    views.set(150, view(150, "someone-else", "running"));
    await indexer.handleEntries([...views.values()].map((known) => submitted(known.taskId, known.taskId === 150 ? "someone-else" : "pager")));
    const reads: number[] = [];
    const viewOf = (id: number) => {
      reads.push(id);
      return views.get(id);
    };
    const ids = (page: { views: TaskView[] }) => page.views.map((listed) => listed.taskId);

    const newest = await listAccountTasks(nats.accountTasks, "pager", { limit: 3 }, viewOf);
    expect(ids(newest)).toEqual([200, 199, 198]);
    expect(newest.more).toBe(true);
    // Without a filter only the page and one more are read.
    expect(reads).toHaveLength(4);

    const running = await listAccountTasks(nats.accountTasks, "pager", { limit: 4, matches: (listed) => listed.status === "running" }, viewOf);
    expect(ids(running)).toEqual([200, 190, 180, 170]);
    expect(running.more).toBe(true);
    const rest = await listAccountTasks(nats.accountTasks, "pager", { limit: 10, before: 170, matches: (listed) => listed.status === "running" }, viewOf);
    expect(ids(rest)).toEqual([160, 140, 130, 120, 110]);
    expect(rest.more).toBe(false);

    const oldest = await listAccountTasks(nats.accountTasks, "pager", { limit: 2, ascending: true, after: 148 }, viewOf);
    expect(ids(oldest)).toEqual([149, 151]);
    // A change of status shows in the next list at once: nothing is written to the index for it.
    views.set(199, view(199, "pager", "running"));
    expect(ids(await listAccountTasks(nats.accountTasks, "pager", { limit: 2, matches: (listed) => listed.status === "running" }, viewOf))).toEqual([200, 199]);
  });
});
