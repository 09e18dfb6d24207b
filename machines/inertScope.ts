import type { ActionExecutor, ActorRef, ActorScope, EventObject, Snapshot } from "xstate";

const ignore = (): undefined => undefined;

/**
 * A scope to step a machine with `machine.transition` / `getInitialSnapshot` without an actor per step: it
 * logs, defers, emits and stops nothing, and hands each action the step asks for to `actionExecutor` (which
 * may run it, collect it, or drop it). `self` is the machine's own actor, made once (the machine never uses it).
 */
export function inertScope<TSnapshot extends Snapshot<unknown>, TEvent extends EventObject>(
  self: ActorRef<TSnapshot, TEvent>,
  actionExecutor: ActionExecutor = ignore,
): ActorScope<TSnapshot, TEvent> {
  return { self, id: "", sessionId: "", system: self.system, logger: ignore, defer: ignore, emit: ignore, stopChild: ignore, actionExecutor };
}
