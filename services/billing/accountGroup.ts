import type { AccountBalance, LedgerEvent, NewLedgerEvent } from "../../contracts/ledger.ts";
import { applyIndexChange, applyToTotals, expired, indexChange, type AccountState } from "./accountFold.ts";
import { causeOf, decideLedger, type DecidingState, type LedgerCommand } from "./accountDecision.ts";

/** Chat holds past their expiry, closed: written ahead of a group's own events so the log says where the money went. */
function lapses(state: DecidingState, at: string): NewLedgerEvent[] {
  const lapsed: NewLedgerEvent[] = [];
  for (const [requestId, hold] of state.chatReservations.entries()) {
    if (expired(hold, at)) lapsed.push({ type: "ChatReservationLapsed", data: { requestId, reservedMicros: hold.amountMicros } });
  }
  return lapsed;
}

/** One command's part of a group decision: its events (none: already done), or why it was refused. */
export type GroupOutcome = { events: LedgerEvent[] } | { refused: unknown };

/** A Map seen through the changes a group decision made, without touching the Map. */
class Overlay<K, V> {
  private readonly changed = new Map<K, V | undefined>();
  constructor(private readonly base: ReadonlyMap<K, V>) {}
  get(key: K): V | undefined {
    return this.changed.has(key) ? this.changed.get(key) : this.base.get(key);
  }
  set(key: K, value: V): void {
    this.changed.set(key, value);
  }
  delete(key: K): void {
    this.changed.set(key, undefined);
  }
  *entries(): Iterable<[K, V]> {
    for (const [key, value] of this.base) if (!this.changed.has(key)) yield [key, value];
    for (const [key, value] of this.changed) if (value !== undefined) yield [key, value];
  }
}

/**
 * Decides commands of one account in order, each on the account as the ones before it leave it (a
 * reservation counts against the next one's available money), without touching `state`: its indexes are
 * read through overlays of what the group changed. A refused command adds nothing and does not stop the
 * others. `at` stamps every event and is the time chat holds expire against. When the group writes anything
 * and is not a task's opening (which holds its reservation alone), expired chat holds are closed first.
 */
export function decideGroup(state: AccountState, commands: readonly LedgerCommand[], at: string): { outcomes: GroupOutcome[]; events: LedgerEvent[] } {
  const indexes = {
    reservations: new Overlay(state.reservations),
    chatReservations: new Overlay(state.chatReservations),
    credits: new Overlay(state.credits),
  };
  let totals: AccountBalance = state;
  const stampAll = (decided: readonly NewLedgerEvent[], cause: (event: NewLedgerEvent) => string): LedgerEvent[] =>
    decided.map((event) => {
      const full = { ...event, meta: { schema: 1, account: state.account, version: totals.version + 1, at, cause: cause(event) } } as LedgerEvent;
      totals = applyToTotals(totals, full);
      applyIndexChange(indexes, indexChange(full));
      return full;
    });
  const opening = commands[0]?.type === "reserve";
  const lapsed = opening ? [] : lapses({ ...totals, ...indexes }, at);
  const lapseEvents = stampAll(lapsed, (event) => `lapse-chat-${event.type === "ChatReservationLapsed" ? event.data.requestId : ""}`);
  const outcomes: GroupOutcome[] = [];
  const events: LedgerEvent[] = [];
  for (const command of commands) {
    let decided: NewLedgerEvent[];
    try {
      decided = decideLedger({ ...totals, ...indexes }, command, at);
    } catch (error) {
      outcomes.push({ refused: error });
      continue;
    }
    const cause = causeOf(command, state.account);
    const own = stampAll(decided, () => cause);
    events.push(...own);
    outcomes.push({ events: own });
  }
  // Nothing of its own to write: no message only for lapses (they ride with the account's next write).
  if (events.length === 0) return { outcomes, events };
  return { outcomes, events: [...lapseEvents, ...events] };
}
