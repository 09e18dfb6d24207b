import { describe, expect, it } from "vitest";
import type { TaskView } from "../contracts/videoTask.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { listAccountTasks } from "../services/tasks/taskIndex.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";
import { openTask } from "./helpers/openTask.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

const at = "2031-02-03T04:05:06.000Z";
const view = (taskId: number, account: string, status: TaskView["status"]): TaskView =>
  ({ taskId, account, model: job.model, status, pricePerMillionTokens: 1, createdAt: at, updatedAt: at, version: 1 }) as TaskView;

/** An account's task list: the subjects of its openings in EVENTS; lists filter on the views the caller reads. */
describe("an account's task list", () => {
  const suite = natsPerSuite("task-index", 2000);

  it("pages newest or oldest first by id, filters on the current view (reading ahead past non-matching ones) and never lists another account's task", async () => {
    const ledger = new AccountLedger(suite.nats);
    const views = new Map<number, TaskView>();
    // 100 tasks of `pager`, every tenth one running, and one of another account in between.
    for (let id = 101; id <= 200; id++) views.set(id, view(id, "pager", id % 10 === 0 ? "running" : "success"));
    views.set(150, view(150, "someone-else", "running"));
    for (const known of views.values()) await openTask(ledger, known.account, known.taskId);
    const reads: number[] = [];
    const viewOf = (id: number) => {
      reads.push(id);
      return views.get(id);
    };
    const ids = (page: { views: TaskView[] }) => page.views.map((listed) => listed.taskId);

    // A task is listed from the moment its opening is written: nothing else is written for it.
    const newest = await listAccountTasks(suite.nats.jsm, "pager", { limit: 3 }, viewOf);
    expect(ids(newest)).toEqual([200, 199, 198]);
    expect(newest.more).toBe(true);
    // Without a filter only the page and one more are read.
    expect(reads).toHaveLength(4);

    const running = await listAccountTasks(suite.nats.jsm, "pager", { limit: 4, matches: (listed) => listed.status === "running" }, viewOf);
    expect(ids(running)).toEqual([200, 190, 180, 170]);
    expect(running.more).toBe(true);
    const rest = await listAccountTasks(suite.nats.jsm, "pager", { limit: 10, before: 170, matches: (listed) => listed.status === "running" }, viewOf);
    expect(ids(rest)).toEqual([160, 140, 130, 120, 110]);
    expect(rest.more).toBe(false);

    const oldest = await listAccountTasks(suite.nats.jsm, "pager", { limit: 2, ascending: true, after: 148 }, viewOf);
    expect(ids(oldest)).toEqual([149, 151]);
    // A change of status shows in the next list at once.
    views.set(199, view(199, "pager", "running"));
    expect(ids(await listAccountTasks(suite.nats.jsm, "pager", { limit: 2, matches: (listed) => listed.status === "running" }, viewOf))).toEqual([200, 199]);
    expect(ids(await listAccountTasks(suite.nats.jsm, "someone-else", { limit: 10 }, viewOf))).toEqual([150]);
  });
});
