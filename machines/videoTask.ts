import { assign, initialTransition, setup, transition, type SnapshotFrom } from "xstate";
import type { NewTaskEvent, StoredVideo, TaskEvent } from "../contracts/videoTask.ts";

/**
 * One video task's lifecycle, driven only by the events in its log. Pure: no I/O, no clocks.
 * Folding a task's events through this machine rebuilds its state after a crash; `decideTaskEvents`
 * turns what a runner observed into the next events, which the runner appends before acting.
 */
export interface VideoTaskContext {
  taskId: number;
  /** Number of events applied; the next event gets version + 1. */
  version: number;
  deadlineAt?: string;
  providerTaskId?: string;
  /** How the task ended, for billing: tokens on success, the reason on failure. */
  outcome?: { kind: "succeeded"; totalTokens: number } | { kind: "failed"; reason: string };
}

export const videoTaskMachine = setup({
  types: {
    context: {} as VideoTaskContext,
    events: {} as TaskEvent,
  },
  actions: {
    countEvent: assign({ version: ({ context }) => context.version + 1 }),
    recordSubmission: assign(({ event }) =>
      event.type === "TaskSubmitted" ? { taskId: event.meta.taskId, deadlineAt: event.data.deadlineAt } : {},
    ),
    recordAcceptance: assign(({ event }) =>
      event.type === "UpstreamAccepted" ? { providerTaskId: event.data.providerTaskId } : {},
    ),
    recordOutcome: assign(({ event }) => {
      if (event.type === "GenerationSucceeded") return { outcome: { kind: "succeeded" as const, totalTokens: event.data.totalTokens } };
      if (event.type === "GenerationFailed") return { outcome: { kind: "failed" as const, reason: event.data.reason } };
      return {};
    }),
  },
  guards: {
    notYetAccepted: ({ context }) => context.providerTaskId === undefined,
    accepted: ({ context }) => context.providerTaskId !== undefined,
  },
}).createMachine({
  id: "videoTask",
  initial: "unsubmitted",
  context: { taskId: 0, version: 0 },
  states: {
    unsubmitted: {
      on: { TaskSubmitted: { target: "pending", actions: ["countEvent", "recordSubmission"] } },
    },
    pending: {
      on: {
        UpstreamAccepted: { guard: "notYetAccepted", actions: ["countEvent", "recordAcceptance"] },
        GenerationStarted: { guard: "accepted", target: "running", actions: "countEvent" },
        GenerationFailed: { target: "failed", actions: ["countEvent", "recordOutcome"] },
      },
    },
    running: {
      on: {
        GenerationSucceeded: { target: "success", actions: ["countEvent", "recordOutcome"] },
        GenerationFailed: { target: "failed", actions: ["countEvent", "recordOutcome"] },
      },
    },
    success: { type: "final" },
    failed: { type: "final" },
  },
});

export type VideoTaskSnapshot = SnapshotFrom<typeof videoTaskMachine>;
export type VideoTaskState = "unsubmitted" | "pending" | "running" | "success" | "failed";

/** Snapshots are immutable, so every task starts from the same one (computing it costs an actor). */
const INITIAL_SNAPSHOT: VideoTaskSnapshot = initialTransition(videoTaskMachine)[0];
export const initialTaskSnapshot = (): VideoTaskSnapshot => INITIAL_SNAPSHOT;

/** Applies one event; an event the current state does not accept leaves the snapshot unchanged. */
export const applyTaskEvent = (snapshot: VideoTaskSnapshot, event: TaskEvent): VideoTaskSnapshot =>
  transition(videoTaskMachine, snapshot, event)[0];

export const foldTaskEvents = (events: readonly TaskEvent[]): VideoTaskSnapshot =>
  events.reduce(applyTaskEvent, initialTaskSnapshot());

export const taskState = (snapshot: VideoTaskSnapshot): VideoTaskState => snapshot.value as VideoTaskState;
export const isFinal = (snapshot: VideoTaskSnapshot): boolean => snapshot.status === "done";

/** What an upstream generator says about a task, in our words. */
export type ProviderReport =
  | { state: "queued" }
  | { state: "running" }
  | { state: "succeeded"; video: StoredVideo; durationSeconds: number; resolution: string; totalTokens: number }
  /** `reason` is shown to the customer; `detail` (internal: tool output, network errors) only to operators. */
  | { state: "failed"; reason: string; detail?: string };

/** Something a runner observed; `decideTaskEvents` maps it to the events it implies. */
export type TaskObservation =
  | { kind: "upstreamAccepted"; providerTaskId: string }
  | { kind: "upstreamRejected"; reason: string }
  | { kind: "upstreamReported"; report: ProviderReport }
  | { kind: "clock"; now: Date; maxTaskMs: number };

export function decideTaskEvents(snapshot: VideoTaskSnapshot, observation: TaskObservation): NewTaskEvent[] {
  const state = taskState(snapshot);
  if (state === "unsubmitted" || isFinal(snapshot)) return [];
  switch (observation.kind) {
    case "upstreamAccepted":
      return snapshot.context.providerTaskId === undefined
        ? [{ type: "UpstreamAccepted", data: { providerTaskId: observation.providerTaskId } }]
        : [];
    case "upstreamRejected":
      return [{ type: "GenerationFailed", data: { reason: observation.reason, stage: "submit" } }];
    case "upstreamReported":
      return decideFromReport(state, observation.report);
    case "clock": {
      const deadline = snapshot.context.deadlineAt;
      if (deadline === undefined || observation.now.getTime() < Date.parse(deadline)) return [];
      const reason = `timed out: not finished within ${describeDuration(observation.maxTaskMs)}`;
      return [{ type: "GenerationFailed", data: { reason, stage: "timeout" } }];
    }
  }
}

const describeDuration = (ms: number): string =>
  ms % 60_000 === 0 ? `${ms / 60_000} minute${ms === 60_000 ? "" : "s"}` : `${ms / 1000} second${ms === 1000 ? "" : "s"}`;

function decideFromReport(state: VideoTaskState, report: ProviderReport): NewTaskEvent[] {
  const started: NewTaskEvent[] = state === "pending" ? [{ type: "GenerationStarted", data: {} }] : [];
  switch (report.state) {
    case "queued":
      return [];
    case "running":
      return started;
    case "succeeded": {
      const { video, durationSeconds, resolution, totalTokens } = report;
      return [...started, { type: "GenerationSucceeded", data: { video, durationSeconds, resolution, totalTokens } }];
    }
    case "failed":
      return [{ type: "GenerationFailed", data: { reason: report.reason, stage: "generation", ...(report.detail ? { detail: report.detail } : {}) } }];
  }
}
