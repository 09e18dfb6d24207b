import { clientReference, type AcceptanceCopy, type NewTaskEvent, type TaskEvent, type TaskSubmittedEvent, type VideoJobSpec } from "../contracts/videoTask.ts";
import { acceptTaskEvent, applyTaskEvent, INITIAL_SNAPSHOT, taskStateOf, type ProviderReport, type TaskState, type VideoTaskSnapshot } from "./videoTask.ts";

/**
 * The video task's decider (emmett's shape: initialState, evolve, decide). `decide` maps a command to the
 * events it would mean and keeps those the machine accepts, one after another; it never repeats the
 * machine's guards. `version` is the position of the last event in the task's log: an event the machine
 * refused still took a place there, so the next append must come after it.
 */
export interface TaskDeciderState {
  version: number;
  snapshot: VideoTaskSnapshot;
}

export type TaskCommand =
  | {
      type: "SubmitTask";
      taskId: number;
      account: string;
      job: VideoJobSpec;
      ignoredFields: string[];
      deadlineAt: string;
      clientReference: string;
      callbackUrl?: string;
      idempotency?: { keyHash: string; fingerprint: string };
    }
  | { type: "RecordAcceptance"; providerTaskId: string; channel?: string }
  | { type: "RecordRejection"; reason: string; detail?: string }
  | { type: "RecordReport"; report: ProviderReport }
  | { type: "CheckDeadline"; now: Date; maxTaskMs: number }
  | { type: "DeleteVideo"; objects: string[] };

export const initialTaskState = (): TaskDeciderState => ({ version: 0, snapshot: INITIAL_SNAPSHOT });

export const evolveTask = (state: TaskDeciderState, event: TaskEvent): TaskDeciderState => ({
  version: state.version + 1,
  snapshot: applyTaskEvent(state.snapshot, event),
});

export const foldTask = (events: readonly TaskEvent[]): TaskDeciderState => events.reduce(evolveTask, initialTaskState());

export const taskOf = (state: TaskDeciderState): TaskState => taskStateOf(state.snapshot);

const describeDuration = (ms: number): string =>
  ms % 60_000 === 0 ? `${ms / 60_000} minute${ms === 60_000 ? "" : "s"}` : `${ms / 1000} second${ms === 1000 ? "" : "s"}`;

/** The events a command would mean, before the machine says which of them are legal now. */
function candidates(command: TaskCommand, task: TaskState): NewTaskEvent[] {
  switch (command.type) {
    case "SubmitTask": {
      const { account, job, ignoredFields, deadlineAt, clientReference, callbackUrl, idempotency } = command;
      return [
        {
          type: "TaskSubmitted",
          data: { account, job, ignoredFields, deadlineAt, clientReference, ...(callbackUrl ? { callbackUrl } : {}), ...(idempotency ? { idempotency } : {}) },
        },
      ];
    }
    case "RecordAcceptance":
      return [{ type: "UpstreamAccepted", data: { providerTaskId: command.providerTaskId, ...(command.channel === undefined ? {} : { channel: command.channel }) } }];
    case "RecordRejection":
      return [{ type: "GenerationFailed", data: { reason: reasonOf(command.reason), stage: "submit", ...detailOf(command) } }];
    case "RecordReport":
      return reportEvents(command.report);
    case "CheckDeadline": {
      // The clock is the command's, not the machine's: a pure machine has no "now".
      if (task.status === "unsubmitted" || command.now.getTime() < Date.parse(task.task.deadlineAt)) return [];
      return [{ type: "GenerationFailed", data: { reason: `timed out: not finished within ${describeDuration(command.maxTaskMs)}`, stage: "timeout" } }];
    }
    case "DeleteVideo":
      return [{ type: "VideoDeleted", data: { objects: command.objects } }];
  }
}

function reportEvents(report: ProviderReport): NewTaskEvent[] {
  switch (report.state) {
    case "queued":
      return [];
    case "running":
      // Started once; progress only when the upstream reports it (the machine records it in steps).
      return [{ type: "GenerationStarted", data: {} }, ...(report.progress === undefined ? [] : [{ type: "GenerationProgressed" as const, data: { progress: report.progress } }])];
    case "succeeded": {
      const { video, durationSeconds, resolution, totalTokens, upstreamTokens, upstreamUsage } = report;
      // One event even when it is the first the runner hears of the task running: the machine lets an accepted
      // task succeed from pending, so a quick upstream costs no "started" event nobody saw happen.
      return [
        {
          type: "GenerationSucceeded",
          data: { video, durationSeconds, resolution, totalTokens, ...(upstreamTokens === undefined ? {} : { upstreamTokens }), ...(upstreamUsage === undefined ? {} : { upstreamUsage }) },
        },
      ];
    }
    case "failed":
      return [{ type: "GenerationFailed", data: { reason: reasonOf(report.reason), stage: "generation", ...detailOf(report) } }];
  }
}

/**
 * The longest failure reason (what the customer reads) and detail (for operators) a task's event holds. Both come
 * from vendors' answers and from the client's own input (a reference's address in a fetch error): a 3 MB host
 * name made a 6 MB event, and settlements copy the reason into the ledger, whose groups of 256 then outgrew the
 * server's message limit and stalled the reactors of every account.
 */
export const MAX_REASON_CHARS = 1_000;
export const MAX_DETAIL_CHARS = 4_000;

const cut = (text: string, most: number): string => (text.length <= most ? text : `${text.slice(0, most - 1)}…`);
const reasonOf = (reason: string): string => cut(reason, MAX_REASON_CHARS);
const detailOf = (source: { detail?: string }) => (source.detail === undefined ? {} : { detail: cut(source.detail, MAX_DETAIL_CHARS) });

/** A new event as the machine would see it once appended (the meta is the appender's; the machine never reads it). */
function placed(event: NewTaskEvent, taskId: number, version: number): TaskEvent {
  return { ...event, meta: { schema: 1, taskId, version, at: NO_TIME } } as TaskEvent;
}

const NO_TIME = new Date(0).toISOString();

/** One event decided, and the task's state once it is appended (`evolveTask` with it would compute the same). */
export interface DecidedEvent {
  event: NewTaskEvent;
  after: TaskDeciderState;
}

/**
 * The events to append for `command`, in order (those the machine accepts one after the other), each with
 * the state it leads to: an appender keeps that state instead of asking the machine again.
 */
export function decideTaskSteps(command: TaskCommand, state: TaskDeciderState): DecidedEvent[] {
  const task = taskOf(state);
  const taskId = command.type === "SubmitTask" ? command.taskId : task.status === "unsubmitted" ? 0 : task.task.taskId;
  const steps: DecidedEvent[] = [];
  let after = state;
  // An accepted task still pending: its next event directly follows the acceptance (nothing else is legal between).
  let acceptance = task.status === "pending" && task.providerTaskId !== undefined ? { providerTaskId: task.providerTaskId, ...(task.channel === undefined ? {} : { channel: task.channel }) } : undefined;
  for (const event of candidates(command, task)) {
    const snapshot = acceptTaskEvent(after.snapshot, placed(event, taskId, after.version + 1));
    if (!snapshot) continue;
    after = { version: after.version + 1, snapshot };
    steps.push({ event: acceptance ? carryingAcceptance(event, acceptance) : event, after });
    acceptance = undefined;
  }
  return steps;
}

/** `event` with a copy of the acceptance it directly follows, for the reactors, which do not read the acceptance (contracts/videoTask.ts). */
function carryingAcceptance(event: NewTaskEvent, accepted: AcceptanceCopy): NewTaskEvent {
  switch (event.type) {
    case "GenerationStarted":
      return { ...event, data: { ...event.data, accepted } };
    case "GenerationSucceeded":
      return { ...event, data: { ...event.data, accepted } };
    case "GenerationFailed":
      return { ...event, data: { ...event.data, accepted } };
    default:
      return event;
  }
}

/** The events to append for `command`, in order: those the machine accepts one after the other. */
export const decideTask = (command: TaskCommand, state: TaskDeciderState): NewTaskEvent[] => decideTaskSteps(command, state).map(({ event }) => event);

/** What a create says about a new task: its first event is decided from this. */
export type NewTask = Omit<Extract<TaskCommand, { type: "SubmitTask" }>, "type" | "clientReference">;

/**
 * A new task's first event (TaskSubmitted), naming the client reference the upstream will get: what an edge
 * writes at create. Decided on an empty task, so never refused.
 */
export function firstTaskEvent(task: NewTask): NewTaskEvent {
  const command: TaskCommand = { type: "SubmitTask", ...task, clientReference: clientReference(task.taskId) };
  const [submitted] = candidates(command, taskOf(initialTaskState()));
  // The machine is asked, but the state after the event is not needed here: no transition (a create's largest allocation).
  if (!submitted || !INITIAL_SNAPSHOT.can(placed(submitted, task.taskId, 1))) throw new Error(`task ${task.taskId}: the task machine refused its own first event`);
  return submitted;
}

/** A new task's first event as its opening carries it: TaskSubmitted, version 1, stamped `at`. */
export function openingTaskEvent(task: NewTask, at: Date): TaskSubmittedEvent {
  const event = firstTaskEvent(task);
  if (event.type !== "TaskSubmitted") throw new Error(`task ${task.taskId}: a first event that is not TaskSubmitted`);
  return { ...event, meta: { schema: 1, taskId: task.taskId, version: 1, at: at.toISOString() } };
}
