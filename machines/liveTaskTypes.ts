import type { StoredVideo, VideoJobSpec } from "../contracts/videoTask.ts";
import type { ProviderStatus } from "../contracts/videoResult.ts";
import type { PollPolicy } from "./liveTaskSchedule.ts";
import type { TaskCommand, TaskDeciderState } from "./videoTaskDecider.ts";

/** An upstream's "done", with where its video is: the copy step takes it into the object store. */
export type UpstreamSuccess = Extract<ProviderStatus, { state: "succeeded" }>;

/**
 * Why a call failed, as the machine needs to know it. Only `unavailable` and `passing` count against a
 * channel: `infrastructure` is our own NATS (a write that timed out), never the vendor's fault.
 */
export type CallFailure =
  | { kind: "rejected"; message: string }
  | { kind: "misconfigured"; message: string }
  | { kind: "unavailable"; message: string; retryAfterMs?: number; refused: boolean }
  | { kind: "passing"; message: string }
  | { kind: "infrastructure"; message: string }
  /** The upstream has no record of the accepted task (a local render whose process ended). */
  | { kind: "lost"; message: string }
  /** The result's address expired: a new status answer signs a new one. */
  | { kind: "gone"; message: string }
  /** The result can never be copied (too large, not a video): the task fails. */
  | { kind: "unusable"; message: string };

/** What the interpreter does for the machine: each answered by one of the events below. */
export type LiveTaskEffect =
  | { do: "readLog" }
  /** A slot on `on` (the channel that accepted the task), or on any of the model's channels in rotation. */
  | { do: "acquire"; on?: string; avoid?: string }
  /** Looks for an earlier submit under the task's client reference: on `channels`, or on every channel. */
  | { do: "find"; channels?: readonly string[] }
  | { do: "submit" }
  | { do: "status"; providerTaskId: string }
  | { do: "restart"; providerTaskId: string }
  | { do: "copy"; status: UpstreamSuccess; isNew: boolean }
  | { do: "append"; command: TaskCommand }
  | { do: "release" }
  | { do: "sideline"; channel: string; message: string }
  | { do: "noteTransient"; channel: string; message: string }
  /** The upstream task that ran out of time (when known), on the channel it was sent to. */
  | { do: "cancel"; providerTaskId?: string; channel?: string; submitCutShort: boolean }
  | { do: "forget"; providerTaskId: string; channel: string }
  | { do: "warn"; message: string; detail?: string };

export type LiveTaskEvent =
  | { type: "LOG_READ"; task: TaskDeciderState; sequence: number }
  | { type: "SLOT"; channel: string; policy: PollPolicy; waitedMs: number }
  /** No channel of the model is in rotation: nothing can ever take the task. */
  | { type: "NO_CHANNEL"; channels: readonly string[] }
  | { type: "FOUND"; channel: string; providerTaskId: string }
  | { type: "NOT_FOUND" }
  | { type: "SUBMITTED"; providerTaskId: string }
  | { type: "STATUS"; status: ProviderStatus }
  | { type: "RESTARTED" }
  | { type: "COPIED"; video: StoredVideo }
  | { type: "APPENDED"; task: TaskDeciderState; sequence: number }
  /** Another writer moved the task's log on (the append's fence): this runner steps aside. */
  | { type: "LOST_RACE" }
  | { type: "FAILED"; failure: CallFailure }
  /** The deadline cut the call or the wait short. */
  | { type: "DEADLINE" }
  /** A best-effort step (cancel, forget) is over, however it went. */
  | { type: "DONE" }
  /** The upstream said there is news (a callback): ask now instead of at the next poll. */
  | { type: "POKE" }
  | { type: "STOP" };

export interface LiveTaskInput {
  taskId: number;
  account: string;
  job: VideoJobSpec;
  deadlineAt: number;
  maxTaskMs: number;
  /** Delivered before: another runner may have held the task, so its log is read first. */
  redelivered: boolean;
  /** A slot the runner could grant with a first delivery (nobody waited for one): the machine starts holding it. */
  slot?: { channel: string; policy: PollPolicy };
  /** The task's first event, folded: a first delivery has nothing else yet. */
  task: TaskDeciderState;
  /** The clock (epoch ms): injected, so the machine stays pure and specs set the time. */
  now: () => number;
  /** 0–1, the task's share of the back-off's random half (so runners don't retry in step). */
  jitter: number;
}

/**
 * What the machine keeps of its input: fixed for the task's life, so every snapshot shares this one object.
 * It is kept apart because xstate's `assign` copies the whole context on every update, and a context of more
 * than 19 keys leaves V8's fast properties (bench/tools/liveTaskMachineCost.ts).
 */
export interface LiveTaskGiven {
  taskId: number;
  account: string;
  job: VideoJobSpec;
  deadlineAt: number;
  maxTaskMs: number;
  /** The first delivery of the task: nothing can have been submitted for it before this runner's first try. */
  firstHolder: boolean;
  now: () => number;
  jitter: number;
}

/** Every key is always present (undefined when unset): one shape for every task, so V8 keeps one map for them. */
export interface LiveTaskContext {
  given: LiveTaskGiven;
  /** The task's log as the machine last knew it, and the log position of its last event (the append fence). */
  task: TaskDeciderState;
  sequence: number;
  /** The channel of the slot held, and its polling policy. */
  channel: string | undefined;
  policy: PollPolicy | undefined;
  /** Submit attempts so far, and the channel to avoid on the next (the one that just failed). */
  attempt: number;
  avoid: string | undefined;
  /** Channels where a submit got no answer: they may have the task. */
  unsure: readonly string[];
  /** The deadline cut a submit short: the upstream is looked up to cancel what it may have created. */
  submitCutShort: boolean;
  polls: number;
  lastAskedAt: number;
  /** The upstream's Retry-After on the last failed poll. */
  retryAfterMs: number;
  /** The upstream's "done" being copied, and failed copy attempts so far. */
  finished: UpstreamSuccess | undefined;
  copyAttempts: number;
  askedForFreshResult: boolean;
  /** What is being written to the log (kept across a retry: a result is copied once, whatever the log does). */
  command: TaskCommand | undefined;
  appendAttempts: number;
  /** The task timed out here: its upstream task is cancelled before the actor ends. */
  cancelAfter: boolean;
}

export type LiveTaskExit = "final" | "steppedAside" | "stopped";
