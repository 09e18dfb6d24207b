import type { KV } from "@nats-io/kv";
import type { Nats } from "../shared/nats.ts";
import type { TaskLogEntry } from "../shared/taskLog.ts";
import { statusChangeOf } from "./statusChanges.ts";
import type { TaskDirectory } from "./taskDirectory.ts";

/** Task ids padded so that key order is id order (ids are below 10^15). */
export const taskIndexKey = (account: string, taskId: number): string => `${account}.${String(taskId).padStart(15, "0")}`;
export const taskIdOfIndexKey = (key: string): number => Number(key.slice(key.lastIndexOf(".") + 1));

/**
 * Keeps `account_tasks`: one key per task under its account, holding its status, so an account's tasks can
 * be listed (newest first) and filtered by status without reading every view. Fed batches of the task log
 * in order (one of the task read models), so a status never goes back; a task that changes several times
 * within a batch is written once, with its last status.
 */
export class TaskIndexer {
  /** `directory` learns each task's owner from the batches before this one sees them. */
  constructor(private readonly nats: Nats, private readonly directory: TaskDirectory) {}

  /** One batch of the task log, in order (services/projector/taskLogReactors.ts). */
  async handleEntries(entries: readonly TaskLogEntry[]): Promise<void> {
    const latest = new Map<number, string>();
    for (const { event } of entries) {
      const status = statusChangeOf(event);
      if (status !== undefined) latest.set(event.meta.taskId, status);
    }
    await Promise.all(
      [...latest].map(async ([taskId, status]) => {
        const owner = await this.directory.ownerOf(taskId);
        if (owner) await this.nats.accountTasks.put(taskIndexKey(owner.account, taskId), status);
      }),
    );
  }
}

/** An account's task ids, newest first, before `before` and with `status` if given, at most `limit`, and whether more follow. */
export async function listAccountTasks(
  index: KV,
  account: string,
  options: { limit: number; before?: number; after?: number; ascending?: boolean; status?: string },
): Promise<{ ids: number[]; more: boolean }> {
  // A key updated while the listing runs (a task moving on) may come twice: each is kept once.
  const seen = new Set<string>();
  for await (const key of await index.keys(`${account}.>`)) seen.add(key);
  const keys = [...seen].sort();
  if (!options.ascending) keys.reverse();
  const ids: number[] = [];
  for (const key of keys) {
    const id = taskIdOfIndexKey(key);
    if (options.before !== undefined && id >= options.before) continue;
    if (options.after !== undefined && id <= options.after) continue;
    if (options.status !== undefined) {
      const entry = await index.get(key);
      if (entry?.string() !== options.status) continue;
    }
    if (ids.length === options.limit) return { ids, more: true };
    ids.push(id);
  }
  return { ids, more: false };
}
