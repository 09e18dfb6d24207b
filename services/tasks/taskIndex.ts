import type { KV } from "@nats-io/kv";
import type { TaskView } from "../../contracts/videoTask.ts";
import type { Nats } from "../shared/nats.ts";
import type { TaskLogEntry } from "../shared/taskLog.ts";

/** Task ids padded so that key order is id order (ids are below 10^15). */
export const taskIndexKey = (account: string, taskId: number): string => `${account}.${String(taskId).padStart(15, "0")}`;
export const taskIdOfIndexKey = (key: string): number => Number(key.slice(key.lastIndexOf(".") + 1));

/**
 * Keeps `account_tasks`: one key per task under its account, written once when the task is created, so an
 * account's tasks can be listed newest first without reading every task. The key is the whole entry (its
 * value is empty): a task's status is read from its view when a list filters by status, exact and current,
 * instead of being written again at every change (three writes for a task that ran; indexes written by
 * older versions hold a status there, which nothing reads any more). Fed batches of the task log in order.
 */
export class TaskIndexer {
  constructor(private readonly nats: Nats) {}

  /** One batch of the task log, in order (services/projector/taskLogReactors.ts). */
  async handleEntries(entries: readonly TaskLogEntry[]): Promise<void> {
    await Promise.all(
      entries.flatMap(({ event }) => (event.type === "TaskSubmitted" ? [this.nats.accountTasks.put(taskIndexKey(event.data.account, event.meta.taskId), EMPTY)] : [])),
    );
  }
}

const EMPTY = new Uint8Array(0);

/** A task's current view (the edge's TaskViewReader: memory, else the bucket or the task's log). */
export type ViewOf = (taskId: number) => TaskView | undefined | Promise<TaskView | undefined>;

/** Views read at once while a filtered list looks for matches: a view not in the edge's memory is a round trip. */
const FILTERED_READS = 32;

/**
 * An account's tasks, newest first (or oldest first with `ascending`), with ids below `before` and above
 * `after` and that `matches` (a filter on status or model) if given, at most `limit`, and whether more follow.
 */
export async function listAccountTasks(
  index: KV,
  account: string,
  options: { limit: number; before?: number; after?: number; ascending?: boolean; matches?: (view: TaskView) => boolean },
  viewOf: ViewOf,
): Promise<{ views: TaskView[]; more: boolean }> {
  // A key written while the listing runs may come twice: each is kept once.
  const seen = new Set<number>();
  for await (const key of await index.keys(`${account}.>`)) {
    const id = taskIdOfIndexKey(key);
    if ((options.before === undefined || id < options.before) && (options.after === undefined || id > options.after)) seen.add(id);
  }
  const ids = [...seen].sort((a, b) => (options.ascending ? a - b : b - a));
  const views: TaskView[] = [];
  for (let start = 0; start < ids.length; ) {
    // One more than the page needs tells whether more follow; a filter may skip some, so it reads ahead.
    const wanted = options.limit + 1 - views.length;
    const chunk = ids.slice(start, start + (options.matches === undefined ? wanted : Math.max(wanted, FILTERED_READS)));
    start += chunk.length;
    for (const view of await Promise.all(chunk.map(viewOf))) {
      if (!view || view.account !== account || (options.matches !== undefined && !options.matches(view))) continue;
      if (views.length === options.limit) return { views, more: true };
      views.push(view);
    }
  }
  return { views, more: false };
}
