import { estimateVideoTokens, type StoredVideo, type VideoJobSpec } from "../contracts/videoTask.ts";
import type { LiveTaskContext, LiveTaskEvent, UpstreamSuccess } from "./liveTaskTypes.ts";
import { pollDelay, retryDelay } from "./liveTaskSchedule.ts";
import { isFinal, type ProviderReport, type TaskState } from "./videoTask.ts";
import { taskOf, type TaskDeciderState } from "./videoTaskDecider.ts";

/** What a customer reads when no channel of the model can take the task (the operator reads the detail). */
export const MISCONFIGURED = "this model is not available right now; no charge was made";

/**
 * A slot granted after this long is reread against the log before any upstream call: meanwhile another runner
 * (after a hand-over) or the deadline may have ended the task. A slot granted at once costs no read.
 */
export const REREAD_AFTER_WAIT_MS = 20;

/** At most one upstream call a second on news: callbacks are unsigned, a flood of them must not become a flood of calls. */
export const POKE_EVERY_MS = 1_000;

/**
 * The task as the event being handled leaves it. A log read or an append carries the log's new state, and the
 * guards of the transition that keeps it judge that state already: the machine goes from the answer to what it
 * means in one step, without a transient state between (each costs xstate a microstep and a snapshot).
 */
export function taskIn(context: LiveTaskContext, event?: LiveTaskEvent): TaskState {
  const state = event?.type === "LOG_READ" || event?.type === "APPENDED" ? event.task : context.task;
  let task = viewed.get(state);
  if (task === undefined) {
    task = taskOf(state);
    viewed.set(state, task);
  }
  return task;
}
/** Each log state's view, made once: a transition's guards ask for it up to eight times. */
const viewed = new WeakMap<TaskDeciderState, TaskState>();

export const pastDeadline = ({ given }: LiveTaskContext): boolean => given.now() >= given.deadlineAt;

/** The upstream's id for the task, once one accepted it. */
export function providerTaskIdOf(context: LiveTaskContext, event?: LiveTaskEvent): string | undefined {
  const task = taskIn(context, event);
  return task.status === "unsubmitted" ? undefined : task.providerTaskId;
}

/** The channel that accepted the task (logs from before channels name none: then the model's provider did). */
export function acceptedChannelOf(context: LiveTaskContext): string | undefined {
  const task = taskIn(context);
  if (task.status === "unsubmitted" || task.providerTaskId === undefined) return undefined;
  return task.channel ?? context.given.job.provider;
}

export const isFinalTask = (context: LiveTaskContext, event?: LiveTaskEvent): boolean => isFinal(taskIn(context, event));

/**
 * An earlier submit may exist: after a hand-over or a crash (not the first holder) on every channel, otherwise
 * on those where a submit got no answer. A task whose log names no client reference was never looked up by one.
 */
export function mayHaveEarlierSubmit(context: LiveTaskContext, event?: LiveTaskEvent): boolean {
  const task = taskIn(context, event);
  if (task.status !== "pending" || task.clientReference === undefined) return false;
  return !context.given.firstHolder || context.unsure.length > 0;
}

/** A wait that ends at the deadline at the latest (one millisecond past it: the wake must see the deadline passed). */
const untilDeadline = ({ given }: LiveTaskContext, ms: number): number => Math.max(0, Math.min(ms, given.deadlineAt - given.now() + 1));

export const delays = {
  /** The next poll by the provider's schedule, later when the upstream asked for it (Retry-After). */
  nextPoll: ({ context }: { context: LiveTaskContext }) =>
    untilDeadline(context, Math.max(context.policy ? pollDelay(context.policy, context.polls) : 0, context.retryAfterMs)),
  /** Back-off before the next submit attempt, never shorter than the upstream's Retry-After. */
  submitRetry: ({ context }: { context: LiveTaskContext }) => untilDeadline(context, retryDelay(context.attempt - 1, context.retryAfterMs, () => context.given.jitter)),
  copyRetry: ({ context }: { context: LiveTaskContext }) => untilDeadline(context, retryDelay(context.copyAttempts - 1, undefined, () => context.given.jitter)),
  /** Our own log could not be written (NATS away): tried again past the deadline too, the timeout itself is a write. */
  appendRetry: ({ context }: { context: LiveTaskContext }) => retryDelay(context.appendAttempts - 1, undefined, () => context.given.jitter),
};

/**
 * The upstream's reported usage wins; otherwise design.md's estimate on what was delivered: the frame size and
 * duration the upstream reports (MiniMax's 768P is larger than the 720p frame reserved for), else what was asked.
 */
export function billedTokens(status: { usageTokens?: number; durationSeconds?: number; resolution?: string }, job: VideoJobSpec): number {
  if (status.usageTokens !== undefined) return status.usageTokens;
  const frame = /^(\d{2,5})\*(\d{2,5})$/.exec(status.resolution ?? "");
  const [width, height] = frame ? [Number(frame[1]), Number(frame[2])] : [job.width, job.height];
  return estimateVideoTokens(width, height, status.durationSeconds ?? job.durationSeconds);
}

/** The success to record once the result is in the object store. */
export function successReport(status: UpstreamSuccess, video: StoredVideo, job: VideoJobSpec): ProviderReport {
  return {
    state: "succeeded",
    video,
    durationSeconds: status.durationSeconds ?? job.durationSeconds,
    resolution: status.resolution ?? `${job.width}*${job.height}`,
    totalTokens: billedTokens(status, job),
    ...(status.usageTokens === undefined ? {} : { upstreamTokens: status.usageTokens }),
    ...(status.upstreamUsage === undefined ? {} : { upstreamUsage: status.upstreamUsage }),
  };
}
