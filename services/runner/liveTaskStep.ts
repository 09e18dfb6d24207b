import type { ActorScope, ExecutableActionsFrom, SnapshotFrom } from "xstate";
import { createActor } from "xstate";
import { inertScope } from "../../machines/inertScope.ts";
import { liveTaskMachine } from "../../machines/liveTask.ts";
import type { LiveTaskEvent, LiveTaskInput } from "../../machines/liveTaskTypes.ts";

export type LiveTaskSnapshot = SnapshotFrom<typeof liveTaskMachine>;
export type LiveTaskAction = ExecutableActionsFrom<typeof liveTaskMachine>;

/**
 * Steps live task machines without an xstate actor each. One transition scope serves every task:
 * `machine.transition` with it computes the next snapshot and hands the actions to `collected` instead of
 * running them (xstate's `transition()` would build an actor per call). The machine's only actions are its
 * effects, delayed events and their cancels, all run by the interpreter (liveTask.ts), which takes them after
 * each step.
 */
let collected: LiveTaskAction[] = [];
let scope: ActorScope<LiveTaskSnapshot, LiveTaskEvent> | undefined;

/** The scope's actor (the machine's `self`, which it never uses) needs an input: the first task's start makes it. */
function scopeFor(input?: LiveTaskInput): ActorScope<LiveTaskSnapshot, LiveTaskEvent> {
  if (scope) return scope;
  if (input === undefined) throw new Error("a live task stepped before any task started");
  scope = inertScope(createActor(liveTaskMachine, { input }), (action) => void collected.push(action as LiveTaskAction));
  return scope;
}

/** What a step that threw collected (another task's) is not the next one's to run. */
function clean(): void {
  if (collected.length > 0) collected = [];
}

export function firstStep(input: LiveTaskInput): LiveTaskSnapshot {
  clean();
  return liveTaskMachine.getInitialSnapshot(scopeFor(input), input);
}

export function nextStep(snapshot: LiveTaskSnapshot, event: LiveTaskEvent): LiveTaskSnapshot {
  clean();
  return liveTaskMachine.transition(snapshot, event, scopeFor());
}

/** The actions the last step asked for, to run now (running one may step another task: each step gets a new list). */
export function takeActions(): LiveTaskAction[] {
  const actions = collected;
  collected = [];
  return actions;
}
