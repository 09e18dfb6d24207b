import { lruOf } from "../shared/lruOf.ts";
import type { TaskEvent } from "../../contracts/videoTask.ts";

/** What every event of a task implies but only its first one (TaskSubmitted) says. */
export interface TaskOwner {
  account: string;
  callbackUrl: string | undefined;
}

/**
 * Task → its account and callback URL, for readers of the whole task log (webhooks): learned from each
 * TaskSubmitted as it passes; a reader that meets a task later (after a restart, or starting in the middle)
 * reads the task's log and teaches it the opening. Bounded.
 */
export class TaskDirectory {
  private readonly owners = lruOf<number, TaskOwner>(100_000);

  /** Remembers a task's owner when `event` is its first event. */
  learn(event: TaskEvent): void {
    if (event.type === "TaskSubmitted") {
      this.owners.set(event.meta.taskId, { account: event.data.account, callbackUrl: event.data.callbackUrl });
    }
  }

  /** Known without any I/O (undefined: not met yet). */
  known(taskId: number): TaskOwner | undefined {
    return this.owners.get(taskId);
  }
}
