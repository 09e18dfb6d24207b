import { LRUCache } from "lru-cache";
import type { TaskEvent } from "../../contracts/videoTask.ts";
import type { TaskLog } from "../shared/taskLog.ts";

/** What every event of a task implies but only its first one (TaskSubmitted) says. */
export interface TaskOwner {
  account: string;
  callbackUrl: string | undefined;
}

/**
 * Task → its account and callback URL, for readers of the whole task log (webhooks, event feeds): learned
 * from each TaskSubmitted as it passes, and read from the task's log for a task first met later (after a
 * restart, or when a reader starts in the middle). Bounded.
 */
export class TaskDirectory {
  private readonly owners = new LRUCache<number, TaskOwner>({ max: 100_000 });

  constructor(private readonly taskLog: TaskLog) {}

  /** Remembers a task's owner when `event` is its first event. */
  learn(event: TaskEvent): void {
    if (event.type === "TaskSubmitted") {
      this.owners.set(event.meta.taskId, { account: event.data.account, callbackUrl: event.data.callbackUrl });
    }
  }

  /** Known without any I/O (undefined: ask `ownerOf`). */
  known(taskId: number): TaskOwner | undefined {
    return this.owners.get(taskId);
  }

  /** Task `taskId` of `account` (every task event's subject names its account). */
  async ownerOf(account: string, taskId: number): Promise<TaskOwner | undefined> {
    const known = this.owners.get(taskId);
    if (known) return known;
    const { events } = await this.taskLog.read(account, taskId);
    const first = events[0];
    if (first?.type !== "TaskSubmitted") return undefined;
    this.learn(first);
    return this.owners.get(taskId);
  }
}
