import type { TaskEvent, TaskView } from "../../contracts/videoTask.ts";
import { statusMovedTo } from "../../machines/videoTask.ts";
import { evolveTaskView, isFinalView } from "./taskView.ts";

/** A task's move to another status, as customers follow it (event streams, webhooks). */
export interface StatusChange {
  /** Stream sequence of the event that made it: the SSE `id`, and where a stream resumes. */
  sequence: number;
  taskId: number;
  account: string;
  view: TaskView;
  final: boolean;
}

/**
 * Folds one event onto the task's view and says whether customers see a change: only a new status is
 * one (an upstream's acceptance changes no status). Pure.
 */
export function applyForStatus(before: TaskView | null, event: TaskEvent, sequence: number): { view: TaskView | null; change?: StatusChange } {
  const view = evolveTaskView(before, event);
  if (!view || view === before || view.status === before?.status) return { view };
  return { view, change: { sequence, taskId: view.taskId, account: view.account, view, final: isFinalView(view) } };
}

/** The status an event moves its task to, by its type alone (the task machine's table); events that change no status give undefined. */
export const statusChangeOf = (event: TaskEvent): TaskView["status"] | undefined => statusMovedTo(event.type);
