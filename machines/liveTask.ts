import { and, assign } from "xstate";
import type { LiveTaskExit } from "./liveTaskTypes.ts";
import { failureOf, finishedOf, initialContext, liveTaskSetup, message } from "./liveTaskSetup.ts";
import { acceptedChannelOf, MISCONFIGURED, providerTaskIdOf, successReport } from "./liveTaskRules.ts";

const RELEASE = { type: "effect", params: { do: "release" } } as const;

/**
 * What the log says comes next: the `deciding` state's choice, made at once by the transitions that bring the
 * log's new state (its guards judge the task the event carries, taskIn) and keep it. A slot already held goes
 * straight to the submit, after a look for an earlier one when there may be one.
 */
const whatNext = (keep?: "keepLog" | "keepAppended") => {
  const keeping = keep === undefined ? [] : [keep];
  return [
    // A log without the task's first event (a read that came back empty) is no ground to submit on.
    { guard: "noTaskInLog", target: "steppedAside", actions: [...keeping, { type: "effect", params: { do: "warn", message: "the task's log read back without its first event; leaving the task" } }] },
    { guard: "timedOutHere", target: "cancelling", actions: keeping },
    // The final event is in the log (settlement reacts to it): the slot goes back, the provider may free what it keeps.
    { guard: and(["final", "nothingToForget"]), target: "done", actions: [...keeping, RELEASE] },
    { guard: "final", target: "forgetting", actions: [...keeping, RELEASE] },
    { guard: "acceptedWithSlot", target: "waiting", actions: keeping },
    { guard: "accepted", target: "pinnedSlot", actions: keeping },
    { guard: and(["holdsSlot", "mayHaveEarlierSubmit"]), target: "finding", actions: keeping },
    { guard: "holdsSlot", target: "calling", actions: keeping },
    { target: "slot", actions: keeping },
  ] as const;
};

/**
 * How the runner carries one live video task, from its first delivery to its end here: a slot on a channel,
 * the submit (after looking for an earlier one when a crash or hand-over may have left one), polls on the
 * provider's schedule, the copy of the result, the deadline, stepping aside when another writer moved the log
 * on. Pure: every call (log reads and appends, provider calls, the channel pool) is an `effect` the interpreter
 * (services/runner/liveTask.ts) runs and answers with an event; the clock is injected. The task's own states
 * and what may be written stay the task machine's (videoTask.ts): `append` goes through its decider.
 * Its states are flat, few are transient, and a transition assigns once where it can: xstate rebuilds the
 * snapshot (state value, tags) on every microstep and every assign, for every task (liveTaskMachineCost.ts).
 */
export const liveTaskMachine = liveTaskSetup.createMachine({
  id: "liveTask",
  context: ({ input }) => initialContext(input),
  initial: "starting",
  // The exit its final state names (xstate hands a final state's output to the machine's through this event).
  output: ({ event }) => ("output" in event ? (event.output as LiveTaskExit | undefined) : undefined) ?? "stopped",
  on: { STOP: ".stopped" },
  states: {
    starting: { always: [{ guard: "redelivered", target: "restoring" }, ...whatNext()] },
    // Another runner may have held the task: its log says where it stands.
    restoring: {
      entry: { type: "effect", params: { do: "readLog" } },
      on: {
        LOG_READ: whatNext("keepLog"),
        FAILED: { target: "appendPause", actions: "countFailedWrite" },
      },
    },
    // The log's state came with a slot or a read that keeps something else: it says what comes next.
    deciding: { always: whatNext() },
    // Accepted by a channel before (a restored task): polled there, in rotation or not.
    pinnedSlot: {
      entry: { type: "effect", params: ({ context }) => ({ do: "acquire", on: acceptedChannelOf(context) ?? context.given.job.provider }) },
      on: {
        SLOT: [
          { guard: "waitedForSlot", target: "rereading", actions: "keepSlot" },
          { target: "deciding", actions: "keepSlot" },
        ],
        DEADLINE: "timingOut",
      },
    },
    // Before any new upstream call after a wait: the task may have ended elsewhere meanwhile.
    rereading: {
      entry: { type: "effect", params: { do: "readLog" } },
      on: {
        LOG_READ: whatNext("keepLog"),
        FAILED: { target: "appendPause", actions: "countFailedWrite" },
      },
    },
    // Submitting: a slot, a look for an earlier submit when there may be one, the submit, back-off after a failure.
    slot: {
      entry: { type: "effect", params: ({ context }) => ({ do: "acquire", ...(context.avoid === undefined ? {} : { avoid: context.avoid }) }) },
      on: {
        SLOT: [
          { guard: "waitedForSlot", target: "rereading", actions: "keepSlot" },
          { guard: "mayHaveEarlierSubmit", target: "finding", actions: "keepSlot" },
          { target: "calling", actions: "keepSlot" },
        ],
        NO_CHANNEL: {
          target: "appending",
          actions: [
            { type: "effect", params: ({ event }) => ({ do: "warn", message: "no channel of this model is in rotation: the task fails; see reelay channels", detail: event.type === "NO_CHANNEL" ? event.channels.join(", ") : "" }) },
            assign({ command: ({ event }) => ({ type: "RecordRejection", reason: MISCONFIGURED, detail: `no channel in rotation among ${event.type === "NO_CHANNEL" ? event.channels.join(", ") : ""}` }) }),
          ],
        },
        DEADLINE: "timingOut",
      },
    },
    finding: {
      entry: { type: "effect", params: ({ context }) => ({ do: "find", ...(context.given.firstHolder ? { channels: context.unsure } : {}) }) },
      on: {
        FOUND: [
          { guard: "foundElsewhere", target: "moving", actions: [{ type: "effect", params: { do: "release" } }, assign({ channel: undefined }), "recordAcceptance"] },
          { target: "appending", actions: "recordAcceptance" },
        ],
        NOT_FOUND: "calling",
        FAILED: "judging",
        DEADLINE: "timingOut",
      },
    },
    // Found on another channel: the task is that channel's from now on, and waits for a slot there.
    moving: {
      entry: { type: "effect", params: ({ event }) => ({ do: "acquire", ...(event.type === "FOUND" ? { on: event.channel } : {}) }) },
      on: { SLOT: { target: "appending", actions: "keepSlot" }, DEADLINE: "timingOut" },
    },
    calling: {
      entry: { type: "effect", params: { do: "submit" } },
      on: {
        SUBMITTED: { target: "appending", actions: "recordAcceptance" },
        FAILED: "judging",
        DEADLINE: { target: "timingOut", actions: assign({ submitCutShort: true }) },
      },
    },
    // A submit or a look-up failed: the failure's kind says what follows.
    judging: {
      always: [
        { guard: "pastDeadline", target: "timingOut" },
        { guard: "rejected", target: "appending", actions: assign({ command: ({ event }) => ({ type: "RecordRejection", reason: message(event), detail: message(event) }) }) },
        {
          guard: "misconfigured",
          target: "slot",
          actions: [{ type: "effect", params: ({ context, event }) => ({ do: "sideline", channel: context.channel ?? "", message: message(event) }) }, { type: "effect", params: { do: "release" } }, "backOff"],
        },
        // Our own NATS failed: nothing to hold against the channel, which may have the task only if it was asked.
        { guard: "ourInfrastructure", target: "backingOff", actions: [{ type: "effect", params: { do: "release" } }, "backOff"] },
        {
          target: "backingOff",
          actions: [
            { type: "effect", params: ({ context, event }) => ({ do: "noteTransient", channel: context.channel ?? "", message: message(event) }) },
            assign(({ context, event }) => {
              const failure = failureOf(event);
              const unsure = failure?.kind === "unavailable" && failure.refused ? context.unsure : [...new Set([...context.unsure, context.channel ?? ""])];
              return { unsure, retryAfterMs: failure?.kind === "unavailable" ? (failure.retryAfterMs ?? 0) : 0 };
            }),
            { type: "effect", params: { do: "release" } },
            "backOff",
          ],
        },
      ],
    },
    // The slot is given back while the task backs off: another task (or channel) can use it.
    backingOff: { after: { submitRetry: [{ guard: "pastDeadline", target: "timingOut" }, { target: "slot" }] } },
    // Polling on the provider's schedule, then the copy of the result.
    // A waiting task is one timer in the interpreter (parked: its state value and context), no call chain.
    waiting: { after: { nextPoll: [{ guard: "pastDeadline", target: "timingOut" }, { target: "asking" }] }, on: { POKE: { guard: "mayAskNow", target: "asking" } } },
    asking: {
      entry: [
        assign(({ context }) => ({ polls: context.polls + 1, lastAskedAt: context.given.now(), retryAfterMs: 0 })),
        { type: "effect", params: ({ context }) => ({ do: "status", providerTaskId: providerTaskIdOf(context) ?? "" }) },
      ],
      on: {
        STATUS: [
          { guard: "succeeded", target: "copying", actions: assign({ finished: ({ event }) => (event.type === "STATUS" && event.status.state === "succeeded" ? event.status : undefined), copyAttempts: 0 }) },
          { target: "appending", actions: assign({ command: ({ event }) => ({ type: "RecordReport", report: event.type === "STATUS" && event.status.state !== "succeeded" ? event.status : { state: "queued" } }) }) },
        ],
        FAILED: [
          { guard: "pastDeadline", target: "timingOut" },
          {
            guard: "misconfigured",
            target: "appending",
            actions: [
              { type: "effect", params: ({ context, event }) => ({ do: "sideline", channel: context.channel ?? "", message: message(event) }) },
              assign({ command: ({ event }) => ({ type: "RecordReport", report: { state: "failed", reason: MISCONFIGURED, detail: message(event) } }) }),
            ],
          },
          { guard: "lost", target: "lostReread" },
          { guard: "ourInfrastructure", target: "waiting" },
          {
            target: "waiting",
            actions: [
              { type: "effect", params: ({ event }) => ({ do: "warn", message: "upstream status call failed; will ask again", detail: message(event) }) },
              { type: "effect", params: ({ context, event }) => ({ do: "noteTransient", channel: context.channel ?? "", message: message(event) }) },
              assign({ retryAfterMs: ({ event }) => { const failure = failureOf(event); return failure?.kind === "unavailable" ? (failure.retryAfterMs ?? 0) : 0; } }),
            ],
          },
        ],
        DEADLINE: "timingOut",
      },
    },
    // The upstream does not know the task: unless it ended elsewhere meanwhile, it is started again there.
    lostReread: {
      entry: { type: "effect", params: { do: "readLog" } },
      on: {
        LOG_READ: [
          { guard: "logSaysFinal", target: "deciding", actions: "keepLog" },
          { target: "restarting", actions: "keepLog" },
        ],
        FAILED: "waiting",
      },
    },
    restarting: {
      entry: { type: "effect", params: ({ context }) => ({ do: "restart", providerTaskId: providerTaskIdOf(context) ?? "" }) },
      on: {
        RESTARTED: "waiting",
        FAILED: { target: "appending", actions: assign({ command: ({ event }) => ({ type: "RecordReport", report: { state: "failed", reason: "the upstream lost the task", detail: message(event) } }) }) },
      },
    },
    copying: {
      entry: [
        // A first copy writes a new object; after a failed one (or an expired address) it may be there already.
        { type: "effect", params: ({ context }) => ({ do: "copy", status: finishedOf(context), isNew: context.given.firstHolder && context.copyAttempts === 0 && !context.askedForFreshResult }) },
      ],
      on: {
        COPIED: {
          target: "appending",
          actions: assign(({ context, event }) => (event.type === "COPIED" ? { command: { type: "RecordReport" as const, report: successReport(finishedOf(context), event.video, context.given.job) } } : {})),
        },
        FAILED: [
          { guard: "pastDeadline", target: "timingOut" },
          // Pre-signed addresses expire (Ark's after 24 h): the next status answer signs a new one.
          { guard: "firstExpiry", target: "waiting", actions: [assign({ askedForFreshResult: true }), { type: "effect", params: { do: "warn", message: "the result address expired; asking the upstream for a fresh one" } }] },
          { guard: "unusable", target: "appending", actions: assign({ command: ({ context, event }) => ({ type: "RecordReport", report: { state: "failed", reason: message(event), detail: `${providerTaskIdOf(context) ?? ""}: ${message(event)}` } }) }) },
          { target: "copyPause", actions: [assign({ copyAttempts: ({ context }) => context.copyAttempts + 1 }), { type: "effect", params: ({ event }) => ({ do: "warn", message: "copying the result failed; retrying until the deadline", detail: message(event) }) }] },
        ],
        DEADLINE: "timingOut",
      },
    },
    copyPause: { after: { copyRetry: "copying" } },
    timingOut: {
      always: {
        target: "appending",
        actions: assign(({ context }) => ({ cancelAfter: true, command: { type: "CheckDeadline", now: new Date(Math.max(context.given.now(), context.given.deadlineAt)), maxTaskMs: context.given.maxTaskMs } })),
      },
    },
    // Writes `command` through the task's decider; the log's new state says what comes next.
    appending: {
      entry: { type: "effect", params: ({ context }) => ({ do: "append", command: context.command ?? { type: "RecordReport", report: { state: "queued" } } }) },
      on: {
        APPENDED: whatNext("keepAppended"),
        LOST_RACE: "steppingAside",
        FAILED: { target: "appendPause", actions: "countFailedWrite" },
      },
    },
    // The write may have landed although its answer was lost: the log is read again before the next try.
    appendPause: { after: { appendRetry: "resyncing" } },
    resyncing: {
      entry: { type: "effect", params: { do: "readLog" } },
      on: {
        LOG_READ: [
          { guard: "nothingToWrite", target: "deciding", actions: "keepLog" },
          { target: "appending", actions: "keepLog" },
        ],
        FAILED: { target: "appendPause", actions: "countFailedWrite" },
      },
    },
    steppingAside: {
      entry: [{ type: "effect", params: { do: "release" } }, { type: "effect", params: { do: "readLog" } }],
      on: {
        LOG_READ: [{ guard: "logSaysFinal", target: "done" }, { target: "steppedAside" }],
        FAILED: "steppedAside",
      },
    },
    cancelling: {
      entry: [{ type: "effect", params: { do: "release" } }, { type: "effect", params: ({ context }) => {
            const providerTaskId = providerTaskIdOf(context);
            const channel = context.channel ?? acceptedChannelOf(context);
            return { do: "cancel", ...(providerTaskId === undefined ? {} : { providerTaskId }), ...(channel === undefined ? {} : { channel }), submitCutShort: context.submitCutShort };
          } }],
      on: { DONE: [{ guard: "nothingToForget", target: "done", actions: RELEASE }, { target: "forgetting", actions: RELEASE }] },
    },
    forgetting: {
      entry: {
        type: "effect",
        params: ({ context }) => ({ do: "forget", providerTaskId: providerTaskIdOf(context) ?? "", channel: context.channel ?? acceptedChannelOf(context) ?? "" }),
      },
      on: { DONE: "done" },
    },
    done: { type: "final", output: "final" as const },
    steppedAside: { type: "final", output: "steppedAside" as const },
    stopped: { type: "final", entry: { type: "effect", params: { do: "release" } }, output: "stopped" as const },
  },
});
