import { expect } from "vitest";

/** A decider in emmett's shape: state from events, events from a command and the state. */
export interface Decider<State, Command, Event, NewEvent> {
  initialState: () => State;
  evolve: (state: State, event: Event) => State;
  decide: (command: Command, state: State) => NewEvent[];
}

/**
 * given(events).when(command).then(newEvents): the specification style of emmett's
 * DeciderSpecification, one helper for every decider. `thenNothing()` is a refused command: the
 * decider appends no event, whatever the command asked for.
 */
export function deciderSpecification<State, Command, Event, NewEvent>(decider: Decider<State, Command, Event, NewEvent>) {
  return {
    given: (events: readonly Event[]) => ({
      when: (command: Command) => {
        const decided = () => decider.decide(command, events.reduce(decider.evolve, decider.initialState()));
        return {
          then: (expected: readonly NewEvent[]) => expect(decided()).toEqual(expected),
          thenNothing: () => expect(decided()).toEqual([]),
        };
      },
    }),
  };
}
