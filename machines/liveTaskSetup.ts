import { assign, setup } from "xstate";
import type { CallFailure, LiveTaskContext, LiveTaskEffect, LiveTaskEvent, LiveTaskExit, LiveTaskInput, UpstreamSuccess } from "./liveTaskTypes.ts";
import { delays, isFinalTask, mayHaveEarlierSubmit, pastDeadline, POKE_EVERY_MS, providerTaskIdOf, REREAD_AFTER_WAIT_MS, taskIn } from "./liveTaskRules.ts";
import { isFinal } from "./videoTask.ts";
import { taskOf } from "./videoTaskDecider.ts";

type Args = { context: LiveTaskContext; event: LiveTaskEvent };
export const failureOf = (event: LiveTaskEvent): CallFailure | undefined => (event.type === "FAILED" ? event.failure : undefined);
const failed =
  (...kinds: CallFailure["kind"][]) =>
  ({ event }: Args): boolean => {
    const failure = failureOf(event);
    return failure !== undefined && kinds.includes(failure.kind);
  };
/** The upstream's "done" being copied: set on the way into `copying`. */
export function finishedOf(context: LiveTaskContext): UpstreamSuccess {
  if (context.finished === undefined) throw new Error(`task ${context.given.taskId}: copying without the upstream's result`);
  return context.finished;
}
export const message = (event: LiveTaskEvent): string => failureOf(event)?.message ?? event.type;

/** Shared by every task that has no channel to doubt (most): an empty array each is 16 bytes a task. */
const NO_CHANNELS: readonly string[] = [];

/** A task's context when its machine starts: every key set, so that every task's context has the same shape. */
export const initialContext = (input: LiveTaskInput): LiveTaskContext => ({
  given: { taskId: input.taskId, account: input.account, job: input.job, deadlineAt: input.deadlineAt, maxTaskMs: input.maxTaskMs, firstHolder: !input.redelivered, now: input.now, jitter: input.jitter },
  task: input.task,
  sequence: 0,
  channel: input.slot?.channel,
  policy: input.slot?.policy,
  attempt: 0,
  avoid: undefined,
  unsure: NO_CHANNELS,
  submitCutShort: false,
  polls: 0,
  lastAskedAt: 0,
  retryAfterMs: 0,
  finished: undefined,
  copyAttempts: 0,
  askedForFreshResult: false,
  command: undefined,
  appendAttempts: 0,
  cancelAfter: false,
});

/** The live task machine's vocabulary: its types, its named actions and guards, its delays (liveTask.ts uses them). */
export const liveTaskSetup = setup({
  types: { context: {} as LiveTaskContext, events: {} as LiveTaskEvent, input: {} as LiveTaskInput, output: {} as LiveTaskExit },
  actions: {
    // Run by the interpreter, which reads the params; nothing to do inside the machine.
    effect: (_: unknown, _params: LiveTaskEffect) => undefined,
    keepLog: assign(({ event }) => (event.type === "LOG_READ" ? { task: event.task, sequence: event.sequence } : {})),
    keepAppended: assign(({ event }) => (event.type === "APPENDED" ? { task: event.task, sequence: event.sequence, appendAttempts: 0, command: undefined } : {})),
    keepSlot: assign(({ event }) => (event.type === "SLOT" ? { channel: event.channel, policy: event.policy } : {})),
    recordAcceptance: assign(({ context, event }) => {
      const accepted = event.type === "FOUND" ? { providerTaskId: event.providerTaskId, channel: event.channel } : event.type === "SUBMITTED" ? { providerTaskId: event.providerTaskId, channel: context.channel } : undefined;
      return accepted === undefined ? {} : { command: { type: "RecordAcceptance" as const, providerTaskId: accepted.providerTaskId, ...(accepted.channel === undefined ? {} : { channel: accepted.channel }) } };
    }),
    backOff: assign(({ context }) => ({ avoid: context.channel, channel: undefined, attempt: context.attempt + 1 })),
    countFailedWrite: assign({ appendAttempts: ({ context }) => context.appendAttempts + 1 }),
  },
  guards: {
    redelivered: ({ context }) => !context.given.firstHolder,
    final: ({ context, event }) => isFinalTask(context, event),
    noTaskInLog: ({ context, event }) => taskIn(context, event).status === "unsubmitted",
    timedOutHere: ({ context, event }) => context.cancelAfter && taskIn(context, event).status === "failed",
    acceptedWithSlot: ({ context, event }) => providerTaskIdOf(context, event) !== undefined && context.channel !== undefined,
    accepted: ({ context, event }) => providerTaskIdOf(context, event) !== undefined,
    holdsSlot: ({ context }) => context.channel !== undefined,
    pastDeadline: ({ context }) => pastDeadline(context),
    waitedForSlot: ({ event }) => event.type === "SLOT" && event.waitedMs >= REREAD_AFTER_WAIT_MS,
    mayHaveEarlierSubmit: ({ context, event }) => mayHaveEarlierSubmit(context, event),
    foundElsewhere: ({ context, event }) => event.type === "FOUND" && event.channel !== context.channel,
    succeeded: ({ event }) => event.type === "STATUS" && event.status.state === "succeeded",
    mayAskNow: ({ context }) => context.given.now() - context.lastAskedAt >= POKE_EVERY_MS,
    firstExpiry: ({ context, event }) => failureOf(event)?.kind === "gone" && !context.askedForFreshResult,
    rejected: failed("rejected"),
    misconfigured: failed("misconfigured"),
    lost: failed("lost"),
    unusable: failed("unusable", "gone"),
    ourInfrastructure: failed("infrastructure"),
    logSaysFinal: ({ event }) => event.type === "LOG_READ" && isFinal(taskOf(event.task)),
    nothingToForget: ({ context, event }) => providerTaskIdOf(context, event) === undefined,
    nothingToWrite: ({ context }) => context.command === undefined,
  },
  delays,
});
