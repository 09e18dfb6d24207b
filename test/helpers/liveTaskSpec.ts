import { createActor } from "xstate";
import type { TaskEvent, VideoJobSpec } from "../../contracts/videoTask.ts";
import { liveTaskMachine } from "../../machines/liveTask.ts";
import type { LiveTaskEffect, LiveTaskEvent, LiveTaskExit } from "../../machines/liveTaskTypes.ts";
import { decideTaskSteps, foldTask, type TaskCommand, type TaskDeciderState } from "../../machines/videoTaskDecider.ts";
import { sampleJob } from "./fixtures.ts";
import { openingEvent } from "./openTask.ts";

export const POLICY = { pollFirstAfterMs: 1_000, pollEveryMs: 1_000, pollMaxEveryMs: 1_000 };

/**
 * Drives the live task machine without NATS or a provider: `given` the task's log, each effect it asks for is
 * recorded, and the spec answers as the interpreter would (`when`). Time is the caller's (vitest's fake timers):
 * the machine's clock and its delays both run on it.
 */
export function givenLiveTask(options: { events?: TaskEvent[]; redelivered?: boolean; maxTaskMs?: number; job?: VideoJobSpec; slotAtStart?: boolean } = {}) {
  const opening = openingEvent("acme", 7, { job: options.job ?? sampleJob, maxTaskMs: options.maxTaskMs ?? 60_000 });
  const log: TaskEvent[] = [opening, ...(options.events ?? [])];
  const effects: LiveTaskEffect[] = [];
  const actor = createActor(liveTaskMachine.provide({ actions: { effect: (_, params) => void effects.push(params) } }), {
    input: {
      taskId: 7,
      account: "acme",
      job: opening.data.job,
      deadlineAt: Date.parse(opening.data.deadlineAt),
      maxTaskMs: options.maxTaskMs ?? 60_000,
      redelivered: options.redelivered ?? false,
      task: foldTask([opening]),
      now: () => Date.now(),
      jitter: 0,
      ...(options.slotAtStart ? { slot: { channel: "local", policy: POLICY } } : {}),
    },
  });
  let seen = 0;
  const spec = {
    log,
    actor,
    start() {
      actor.start();
      return spec;
    },
    /** The effects asked for since the last call. */
    effects(): LiveTaskEffect[] {
      const fresh = effects.slice(seen);
      seen = effects.length;
      return fresh;
    },
    allEffects: () => effects,
    when(event: LiveTaskEvent) {
      actor.send(event);
      return spec;
    },
    /** The log as it is now, folded, with its last position (one per event). */
    logRead(): LiveTaskEvent {
      return { type: "LOG_READ", task: foldTask(log), sequence: log.length };
    },
    /** Writes `command` as the decider would, and answers the machine's append with the state it led to. */
    appended(command: TaskCommand): LiveTaskEvent {
      let state: TaskDeciderState = foldTask(log);
      for (const { event, after } of decideTaskSteps(command, state)) {
        log.push({ ...event, meta: { schema: 1, taskId: 7, version: after.version, at: new Date().toISOString() } } as TaskEvent);
        state = after;
      }
      return { type: "APPENDED", task: state, sequence: log.length };
    },
    exit: (): LiveTaskExit | undefined => (actor.getSnapshot().status === "done" ? actor.getSnapshot().output : undefined),
    state: () => actor.getSnapshot().value,
  };
  return spec;
}

/** The one append the machine is waiting for, as it asked for it. */
export function appendOf(effects: readonly LiveTaskEffect[]): TaskCommand {
  const append = effects.find((effect) => effect.do === "append");
  if (append?.do !== "append") throw new Error(`no append among ${effects.map((effect) => effect.do).join(", ")}`);
  return append.command;
}
