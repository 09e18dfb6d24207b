import type { AccountBalance, LedgerEvent, NewLedgerEvent } from "../../contracts/ledger.ts";
import { ForbiddenError, ValidationError } from "../shared/errors.ts";
import { formatYuan } from "./pricing.ts";

/**
 * An account's money, folded from its ledger events: the totals (also the `balances` read model, folded
 * by the same `applyToTotals`, so the two never disagree on arithmetic) plus the index of open
 * reservations that the writer's decisions need (is task 42 reserved, and for how much?).
 *
 * The index is a Map updated in place by `applyLedgerEvent`: copying it for every event would cost
 * O(open tasks) per create. So a fold's earlier states keep their own totals but share the latest index;
 * decide only from the newest state.
 */
export interface AccountState extends AccountBalance {
  reservations: Map<number, number>;
}

export const emptyBalance = (account: string): AccountBalance => ({
  account,
  exists: false,
  balanceMicros: 0,
  reservedMicros: 0,
  openReservations: 0,
  openedAt: "",
  updatedAt: "",
  version: 0,
  sequence: 0,
});

export const emptyAccount = (account: string): AccountState => ({ ...emptyBalance(account), reservations: new Map() });

export const availableMicros = (state: Pick<AccountBalance, "balanceMicros" | "reservedMicros">): number =>
  state.balanceMicros - state.reservedMicros;

/** Folds one event into the totals. Generic: the writer's state carries its reservation index through. */
export function applyToTotals<Totals extends AccountBalance>(totals: Totals, event: LedgerEvent): Totals {
  // One object per event: replay speed is bound by this fold.
  const version = event.meta.version;
  const updatedAt = event.meta.at;
  switch (event.type) {
    case "AccountOpened":
      return { ...totals, version, updatedAt, exists: true, openedAt: event.meta.at };
    case "AccountCredited":
      return { ...totals, version, updatedAt, exists: true, balanceMicros: totals.balanceMicros + event.data.amountMicros };
    case "CostReserved":
      return {
        ...totals,
        version,
        updatedAt,
        reservedMicros: totals.reservedMicros + event.data.amountMicros,
        openReservations: totals.openReservations + 1,
      };
    case "ReservationSettled":
      return {
        ...totals,
        version,
        updatedAt,
        balanceMicros: totals.balanceMicros - event.data.costMicros,
        reservedMicros: totals.reservedMicros - event.data.reservedMicros,
        openReservations: totals.openReservations - 1,
      };
    case "ReservationReleased":
      return {
        ...totals,
        version,
        updatedAt,
        reservedMicros: totals.reservedMicros - event.data.reservedMicros,
        openReservations: totals.openReservations - 1,
      };
    case "ChatUsageCharged":
      return { ...totals, version, updatedAt, balanceMicros: totals.balanceMicros - event.data.costMicros };
  }
}

/** What an event does to the open reservations: opens one for a task (its amount), closes one (undefined), or nothing. */
function reservationChange(event: LedgerEvent): { taskId: number; amountMicros: number | undefined } | undefined {
  if (event.type === "CostReserved") return { taskId: event.data.taskId, amountMicros: event.data.amountMicros };
  if (event.type === "ReservationSettled" || event.type === "ReservationReleased") return { taskId: event.data.taskId, amountMicros: undefined };
  return undefined;
}

/** Folds one event into the writer's state: new totals, reservation index updated in place. */
export function applyLedgerEvent(state: AccountState, event: LedgerEvent): AccountState {
  const change = reservationChange(event);
  if (change?.amountMicros !== undefined) state.reservations.set(change.taskId, change.amountMicros);
  else if (change) state.reservations.delete(change.taskId);
  return applyToTotals(state, event);
}

export type LedgerCommand =
  | { type: "open" }
  | { type: "credit"; amountMicros: number; creditId: string; note?: string; actor?: string }
  | { type: "reserve"; taskId: number; amountMicros: number }
  | { type: "settle"; taskId: number; costMicros: number; totalTokens: number; model: string }
  | { type: "release"; taskId: number; reason: string }
  | { type: "chargeChat"; requestId: string; model: string; promptTokens: number; completionTokens: number; costMicros: number };

/** What deciding needs: the totals, and each task's open reservation. */
export interface DecidingState extends AccountBalance {
  reservations: { get(taskId: number): number | undefined };
}

/**
 * Commands whose repeats the decider itself absorbs (a task's reservation is closed once), so several can
 * share one message. Credits and chat charges rely on their cause as the message's msgID to land once, and a
 * reservation is a task's opening (its own subject), so each of those is a message of its own.
 */
export const isGroupable = (command: LedgerCommand): boolean => command.type === "settle" || command.type === "release";

/** Create answers 403 naming the shortfall; nothing is reserved. */
export class InsufficientBalanceError extends ForbiddenError {}

/** The cause of a command: also its publish msgID, so a retried command is written once. */
export function causeOf(command: LedgerCommand, account: string): string {
  switch (command.type) {
    case "open":
      return `open-${account}`;
    case "credit":
      return `credit-${command.creditId}`;
    case "reserve":
      return `reserve-task-${command.taskId}`;
    case "settle":
      return `settle-task-${command.taskId}`;
    case "release":
      return `release-task-${command.taskId}`;
    case "chargeChat":
      return `chat-${command.requestId}`;
  }
}

/**
 * What a command adds to the ledger, given the account now. Settling or releasing a task without an
 * open reservation adds nothing: that is what makes redelivered successes and failures charge once.
 */
export function decideLedger(state: DecidingState, command: LedgerCommand): NewLedgerEvent[] {
  const open = "taskId" in command ? state.reservations.get(command.taskId) : undefined;
  switch (command.type) {
    case "open":
      return state.exists ? [] : [{ type: "AccountOpened", data: {} }];
    case "credit":
      // A balance past 2^53 µ¥ is no longer exact, and the read model's schema would refuse it for good.
      if (!Number.isSafeInteger(state.balanceMicros + command.amountMicros)) {
        throw new ValidationError(`credit refused: the balance would exceed ${formatYuan(Number.MAX_SAFE_INTEGER)} yuan`);
      }
      return [{ type: "AccountCredited", data: { amountMicros: command.amountMicros, ...(command.note ? { note: command.note } : {}), ...(command.actor ? { actor: command.actor } : {}) } }];
    case "reserve": {
      if (open !== undefined) return [];
      const available = availableMicros(state);
      if (available < command.amountMicros) {
        throw new InsufficientBalanceError(
          `insufficient balance: this task needs ${formatYuan(command.amountMicros)} yuan, available ${formatYuan(Math.max(available, 0))}`,
        );
      }
      return [{ type: "CostReserved", data: { taskId: command.taskId, amountMicros: command.amountMicros } }];
    }
    case "settle":
      if (open === undefined) return [];
      return [
        {
          type: "ReservationSettled",
          data: { taskId: command.taskId, reservedMicros: open, costMicros: command.costMicros, totalTokens: command.totalTokens, model: command.model },
        },
      ];
    case "release":
      if (open === undefined) return [];
      return [{ type: "ReservationReleased", data: { taskId: command.taskId, reservedMicros: open, reason: command.reason } }];
    case "chargeChat": {
      const { requestId, model, promptTokens, completionTokens, costMicros } = command;
      return [{ type: "ChatUsageCharged", data: { requestId, model, promptTokens, completionTokens, costMicros } }];
    }
  }
}

/** One command's part of a group decision: its events (none: already done), or why it was refused. */
export type GroupOutcome = { events: LedgerEvent[] } | { refused: unknown };

/**
 * Decides commands of one account in order, each on the account as the ones before it leave it (a
 * reservation counts against the next one's available money), without touching `state`: its reservation
 * index is read through an overlay of what the group opened and closed. A refused command adds nothing
 * and does not stop the others. `at` stamps every event.
 */
export function decideGroup(state: AccountState, commands: readonly LedgerCommand[], at: string): { outcomes: GroupOutcome[]; events: LedgerEvent[] } {
  const changed = new Map<number, number | undefined>();
  const reservations = { get: (taskId: number) => (changed.has(taskId) ? changed.get(taskId) : state.reservations.get(taskId)) };
  let totals: AccountBalance = state;
  const outcomes: GroupOutcome[] = [];
  const events: LedgerEvent[] = [];
  for (const command of commands) {
    let decided: NewLedgerEvent[];
    try {
      decided = decideLedger({ ...totals, reservations }, command);
    } catch (error) {
      outcomes.push({ refused: error });
      continue;
    }
    const cause = causeOf(command, state.account);
    const own = decided.map((event) => {
      const full = { ...event, meta: { schema: 1, account: state.account, version: totals.version + 1, at, cause } } as LedgerEvent;
      totals = applyToTotals(totals, full);
      const change = reservationChange(full);
      if (change) changed.set(change.taskId, change.amountMicros);
      return full;
    });
    events.push(...own);
    outcomes.push({ events: own });
  }
  return { outcomes, events };
}
