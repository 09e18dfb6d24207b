import { versionBeforeForReactors, type TaskEvent, type TaskView } from "../../contracts/videoTask.ts";
import { isFinalStatus, statusAfter } from "../../machines/videoTask.ts";
import { costMicros } from "../billing/pricing.ts";
import { EventOutOfOrder } from "../shared/projection.ts";


/**
 * Folds a task's events into the document GET videosTask reads. Pure and idempotent: an event whose
 * version was already applied changes nothing, so redelivery and replay yield the same document.
 */
export const evolveTaskView = (view: TaskView | null, event: TaskEvent): TaskView | null => foldOnto(view, event, event.meta.version - 1);

/**
 * The same fold for the reactors, which read every event but the upstream's acceptance (contracts/videoTask.ts):
 * the event after it carries its copy, and follows the version before it.
 */
export const evolveTaskViewForReactors = (view: TaskView | null, event: TaskEvent): TaskView | null => foldOnto(view, event, versionBeforeForReactors(event));

/** `event` onto `view`, which must be at version `follows` (an earlier version: out of order, to be read again). */
function foldOnto(view: TaskView | null, event: TaskEvent, follows: number): TaskView | null {
  const applied = view?.version ?? 0;
  if (event.meta.version <= applied) return view;
  if (applied !== follows) {
    throw new EventOutOfOrder(`task ${event.meta.taskId}: got version ${event.meta.version} after ${applied}`);
  }
  const stamp = { version: event.meta.version, updatedAt: event.meta.at };
  const accepted = "accepted" in event.data && event.data.accepted ? { providerTaskId: event.data.accepted.providerTaskId } : {};
  // The status is the task machine's (machines/videoTask.ts): this fold keeps only what customers read beside it.
  const status = statusAfter(view?.status, event.type) ?? view?.status;
  if (event.type === "TaskSubmitted") {
    return {
      taskId: event.meta.taskId,
      account: event.data.account,
      model: event.data.job.model,
      pricePerMillionTokens: event.data.job.pricePerMillionTokens,
      status: statusAfter(undefined, event.type) ?? "pending",
      prompt: event.data.job.prompt,
      requestedSeconds: event.data.job.durationSeconds,
      width: event.data.job.width,
      height: event.data.job.height,
      ...(event.data.job.remixOf === undefined ? {} : { remixOf: event.data.job.remixOf }),
      createdAt: event.meta.at,
      ...stamp,
    };
  }
  if (view === null) throw new EventOutOfOrder(`task ${event.meta.taskId}: ${event.type} before TaskSubmitted`);
  switch (event.type) {
    case "UpstreamAccepted":
      return { ...view, ...stamp, providerTaskId: event.data.providerTaskId };
    case "GenerationStarted":
      return { ...view, ...stamp, ...accepted, status: status ?? view.status };
    case "GenerationSucceeded":
      return {
        ...view,
        ...stamp,
        ...accepted,
        status: status ?? view.status,
        finishedAt: event.meta.at,
        video: event.data.video,
        durationSeconds: event.data.durationSeconds,
        resolution: event.data.resolution,
        totalTokens: event.data.totalTokens,
        costMicros: costMicros([{ tokens: event.data.totalTokens, pricePerMillionTokens: view.pricePerMillionTokens }]),
      };
    case "GenerationFailed":
      return { ...view, ...stamp, ...accepted, status: status ?? view.status, finishedAt: event.meta.at, failureReason: event.data.reason };
    case "GenerationProgressed":
      return { ...view, ...stamp, progress: event.data.progress, progressSince: view.progressSince ?? event.meta.at };
    case "VideoDeleted": {
      const { video: _deleted, ...rest } = view;
      return { ...rest, ...stamp, deletedAt: event.meta.at };
    }
  }
}

/** A task's view from its whole log (null for an empty one). */
export const foldTaskView = (events: readonly TaskEvent[]): TaskView | null => events.reduce<TaskView | null>(evolveTaskView, null);

export const taskViewKey = (taskId: number): string => String(taskId);

/** A view whose task has ended: nothing but a deletion of its video follows. */
export const isFinalView = (view: TaskView): boolean => isFinalStatus(view.status);
