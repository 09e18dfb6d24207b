import { assign, createActor, initialTransition, setup, type ActorScope, type SnapshotFrom } from "xstate";
import type { StoredVideo, TaskEvent, UpstreamUsage, VideoJobSpec } from "../contracts/videoTask.ts";
import { inertScope } from "./inertScope.ts";

/**
 * One video task's lifecycle: the only transition table. Pure: no I/O, no clocks. Which event is legal
 * in which state, and with which guard, is said here and nowhere else; the decider
 * (videoTaskDecider.ts) asks this machine with `can` instead of repeating its rules.
 */
export interface SubmittedTask {
  taskId: number;
  account: string;
  job: VideoJobSpec;
  ignoredFields: string[];
  deadlineAt: string;
}

export type TaskOutcome = { kind: "succeeded"; totalTokens: number } | { kind: "failed"; reason: string };

interface VideoTaskContext {
  submitted?: SubmittedTask;
  /** From TaskSubmitted: a submit under this reference may have reached the upstream. */
  clientReference?: string;
  providerTaskId?: string;
  /** The channel that accepted the task (absent in logs from before channels). */
  channel?: string;
  outcome?: TaskOutcome;
  /** The finished task's video was deleted. */
  deleted?: boolean;
  /** The upstream's last recorded progress. */
  progress?: number;
}

/** Progress is recorded when it has grown this much (or reached 100): a handful of events per task, not one per poll. */
export const PROGRESS_STEP = 10;

export const videoTaskMachine = setup({
  types: {
    context: {} as VideoTaskContext,
    events: {} as TaskEvent,
  },
  actions: {
    recordSubmission: assign(({ event }) =>
      event.type === "TaskSubmitted" ? { submitted: { taskId: event.meta.taskId, ...event.data }, clientReference: event.data.clientReference } : {},
    ),
    recordAcceptance: assign(({ event }) =>
      event.type === "UpstreamAccepted" ? { providerTaskId: event.data.providerTaskId, ...(event.data.channel === undefined ? {} : { channel: event.data.channel }) } : {},
    ),
    recordOutcome: assign(({ event }) => {
      if (event.type === "GenerationSucceeded") return { outcome: { kind: "succeeded" as const, totalTokens: event.data.totalTokens } };
      if (event.type === "GenerationFailed") return { outcome: { kind: "failed" as const, reason: event.data.reason } };
      return {};
    }),
    recordDeletion: assign({ deleted: true }),
    recordProgress: assign(({ event }) => (event.type === "GenerationProgressed" ? { progress: event.data.progress } : {})),
  },
  guards: {
    notDeleted: ({ context }) => context.deleted !== true,
    progressGrew: ({ context, event }) =>
      event.type === "GenerationProgressed" && (event.data.progress >= (context.progress ?? 0) + PROGRESS_STEP || (event.data.progress === 100 && (context.progress ?? 0) < 100)),
    notYetAccepted: ({ context }) => context.providerTaskId === undefined,
    accepted: ({ context }) => context.providerTaskId !== undefined,
  },
}).createMachine({
  id: "videoTask",
  initial: "unsubmitted",
  context: {},
  states: {
    unsubmitted: {
      on: { TaskSubmitted: { target: "pending", actions: "recordSubmission" } },
    },
    pending: {
      on: {
        UpstreamAccepted: { guard: "notYetAccepted", actions: "recordAcceptance" },
        GenerationStarted: { guard: "accepted", target: "running" },
        // An upstream's first answer may already be "done": the task never showed as running here.
        GenerationSucceeded: { guard: "accepted", target: "success", actions: "recordOutcome" },
        GenerationFailed: { target: "failed", actions: "recordOutcome" },
      },
    },
    running: {
      on: {
        GenerationProgressed: { guard: "progressGrew", actions: "recordProgress" },
        GenerationSucceeded: { target: "success", actions: "recordOutcome" },
        GenerationFailed: { target: "failed", actions: "recordOutcome" },
      },
    },
    // Ended: nothing changes the outcome any more; only its video can be deleted, once.
    success: { on: { VideoDeleted: { guard: "notDeleted", actions: "recordDeletion" } } },
    failed: { on: { VideoDeleted: { guard: "notDeleted", actions: "recordDeletion" } } },
  },
});

export type VideoTaskSnapshot = SnapshotFrom<typeof videoTaskMachine>;
export type TaskStatus = TaskState["status"];

/**
 * A task as the rest of reelay sees it. A union, so that a final task without its outcome, or a running
 * task without the upstream's id, cannot be represented.
 */
export type TaskState =
  | { status: "unsubmitted" }
  | { status: "pending"; task: SubmittedTask; providerTaskId?: string; channel?: string; clientReference?: string }
  | { status: "running"; task: SubmittedTask; providerTaskId: string; channel?: string }
  | { status: "success"; task: SubmittedTask; providerTaskId: string; channel?: string; outcome: Extract<TaskOutcome, { kind: "succeeded" }> }
  | { status: "failed"; task: SubmittedTask; providerTaskId?: string; channel?: string; outcome: Extract<TaskOutcome, { kind: "failed" }> };

export const isFinal = (state: TaskState): state is Extract<TaskState, { status: "success" | "failed" }> =>
  state.status === "success" || state.status === "failed";

/** Snapshots are immutable, so every task starts from the same one (computing it costs an actor). */
export const INITIAL_SNAPSHOT: VideoTaskSnapshot = initialTransition(videoTaskMachine)[0];

/**
 * One inert scope for every transition. xstate's `transition()` builds a new actor, and computes its initial
 * snapshot, on every call: a tenth of a runner's CPU. This machine only guards and assigns (no children, no
 * actions to execute, no emitted events), so nothing is ever registered in the scope or run through it, and one
 * scope serves all tasks; `test/videoTaskMachine.unit.spec.ts` checks it against `transition()`.
 */
const TRANSITION_SCOPE: ActorScope<VideoTaskSnapshot, TaskEvent> = inertScope(createActor(videoTaskMachine));

/** The snapshot after `event`, or undefined when the current state does not accept it. */
export const acceptTaskEvent = (snapshot: VideoTaskSnapshot, event: TaskEvent): VideoTaskSnapshot | undefined =>
  snapshot.can(event) ? videoTaskMachine.transition(snapshot, event, TRANSITION_SCOPE) : undefined;

/** Applies one event; an event the current state does not accept leaves the snapshot unchanged. */
export const applyTaskEvent = (snapshot: VideoTaskSnapshot, event: TaskEvent): VideoTaskSnapshot => acceptTaskEvent(snapshot, event) ?? snapshot;

/** The machine's snapshot in the union's terms. The machine's transitions make every branch total. */
export function taskStateOf(snapshot: VideoTaskSnapshot): TaskState {
  const { submitted, providerTaskId, outcome, clientReference, channel } = snapshot.context;
  const status = snapshot.value as TaskStatus;
  if (status === "unsubmitted" || !submitted) return { status: "unsubmitted" };
  const ran = channel === undefined ? {} : { channel };
  switch (status) {
    case "pending":
      return {
        status,
        task: submitted,
        ...(providerTaskId === undefined ? {} : { providerTaskId }),
        ...ran,
        ...(clientReference === undefined ? {} : { clientReference }),
      };
    case "running":
      if (providerTaskId !== undefined) return { status, task: submitted, providerTaskId, ...ran };
      break;
    case "success":
      if (providerTaskId !== undefined && outcome?.kind === "succeeded") return { status, task: submitted, providerTaskId, ...ran, outcome };
      break;
    case "failed":
      if (outcome?.kind === "failed") return { status, task: submitted, outcome, ...ran, ...(providerTaskId === undefined ? {} : { providerTaskId }) };
      break;
  }
  throw new Error(`task ${submitted.taskId}: machine state ${status} without what it implies`);
}

/** What an upstream generator says about a task, in our words. */
export type ProviderReport =
  | { state: "queued" }
  | { state: "running"; progress?: number }
  | { state: "succeeded"; video: StoredVideo; durationSeconds: number; resolution: string; totalTokens: number; upstreamTokens?: number; upstreamUsage?: UpstreamUsage }
  /** `reason` is shown to the customer; `detail` (internal: tool output, network errors) only to operators. */
  | { state: "failed"; reason: string; detail?: string };

/** A task's status as customers see it: listed from its first event on, so never "unsubmitted". */
export type PublicTaskStatus = Exclude<TaskStatus, "unsubmitted">;

/**
 * The machine's transition table by status and event type: the state each event leads to (guards aside).
 * Read models that keep a status and not the whole snapshot (the task view, status changes, stats) read their
 * rules here instead of restating them; the log they fold holds only events the decider let through its guards.
 */
const STATUS_MOVES: ReadonlyMap<TaskStatus, ReadonlyMap<string, TaskStatus>> = new Map(
  Object.entries(videoTaskMachine.root.states).map(([status, node]) => [
    status as TaskStatus,
    new Map(Object.entries(node.on).flatMap(([type, transitions]) => transitions.flatMap(({ target }) => (target?.[0] ? [[type, target[0].key as TaskStatus] as const] : [])).slice(0, 1))),
  ]),
);

/** The status after `type` is written to a task in `status` (undefined: no task yet, and still none after it). */
export function statusAfter(status: PublicTaskStatus | undefined, type: TaskEvent["type"]): PublicTaskStatus | undefined {
  const next = STATUS_MOVES.get(status ?? "unsubmitted")?.get(type) ?? status;
  return next === "unsubmitted" ? undefined : next;
}

/** The status an event of this type moves a task to, whatever it was before (undefined: it moves none). */
export function statusMovedTo(type: TaskEvent["type"]): PublicTaskStatus | undefined {
  for (const moves of STATUS_MOVES.values()) {
    const next = moves.get(type);
    if (next !== undefined && next !== "unsubmitted") return next;
  }
  return undefined;
}

/** An ended task: its state leads nowhere else (only its video can still be deleted). */
export const isFinalStatus = (status: TaskStatus | undefined): boolean => status !== undefined && status !== "unsubmitted" && STATUS_MOVES.get(status)?.size === 0;
