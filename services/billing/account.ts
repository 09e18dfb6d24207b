import type { AccountBalance, LedgerEvent, NewLedgerEvent } from "../../contracts/ledger.ts";
import { ForbiddenError, ValidationError } from "../shared/errors.ts";
import { formatYuan } from "./pricing.ts";

/**
 * An account's money, folded from its ledger events. Pure: the same fold serves the writer's decisions
 * (can this task reserve?) and the `balances` read model, so the two can never disagree on arithmetic.
 */
export type AccountState = AccountBalance;

export const emptyAccount = (account: string): AccountState => ({
  account,
  exists: false,
  balanceMicros: 0,
  reservedMicros: 0,
  reservations: {},
  openedAt: "",
  updatedAt: "",
  version: 0,
});

export const availableMicros = (state: Pick<AccountBalance, "balanceMicros" | "reservedMicros">): number =>
  state.balanceMicros - state.reservedMicros;

function withoutReservation(reservations: Record<string, number>, taskId: number): Record<string, number> {
  const { [String(taskId)]: _freed, ...rest } = reservations;
  return rest;
}

/** Folds one event. Generic so read models can carry extra fields (e.g. the stream sequence) through it. */
export function applyLedgerEvent<State extends AccountState>(state: State, event: LedgerEvent): State {
  // One object per event: replay speed is bound by this fold.
  const version = event.meta.version;
  const updatedAt = event.meta.at;
  switch (event.type) {
    case "AccountOpened":
      return { ...state, version, updatedAt, exists: true, openedAt: event.meta.at };
    case "AccountCredited":
      return { ...state, version, updatedAt, exists: true, balanceMicros: state.balanceMicros + event.data.amountMicros };
    case "CostReserved":
      return {
        ...state,
        version,
        updatedAt,
        reservedMicros: state.reservedMicros + event.data.amountMicros,
        reservations: { ...state.reservations, [String(event.data.taskId)]: event.data.amountMicros },
      };
    case "ReservationSettled":
      return {
        ...state,
        version,
        updatedAt,
        balanceMicros: state.balanceMicros - event.data.costMicros,
        reservedMicros: state.reservedMicros - event.data.reservedMicros,
        reservations: withoutReservation(state.reservations, event.data.taskId),
      };
    case "ReservationReleased":
      return {
        ...state,
        version,
        updatedAt,
        reservedMicros: state.reservedMicros - event.data.reservedMicros,
        reservations: withoutReservation(state.reservations, event.data.taskId),
      };
    case "ChatUsageCharged":
      return { ...state, version, updatedAt, balanceMicros: state.balanceMicros - event.data.costMicros };
  }
}

export type LedgerCommand =
  | { type: "open" }
  | { type: "credit"; amountMicros: number; creditId: string; note?: string }
  | { type: "reserve"; taskId: number; amountMicros: number }
  | { type: "settle"; taskId: number; costMicros: number; totalTokens: number; model: string }
  | { type: "release"; taskId: number; reason: string }
  | { type: "chargeChat"; requestId: string; model: string; promptTokens: number; completionTokens: number; costMicros: number };

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
export function decideLedger(state: AccountState, command: LedgerCommand): NewLedgerEvent[] {
  const open = state.reservations[String("taskId" in command ? command.taskId : "")];
  switch (command.type) {
    case "open":
      return state.exists ? [] : [{ type: "AccountOpened", data: {} }];
    case "credit":
      // A balance past 2^53 µ¥ is no longer exact, and the read model's schema would refuse it for good.
      if (!Number.isSafeInteger(state.balanceMicros + command.amountMicros)) {
        throw new ValidationError(`credit refused: the balance would exceed ${formatYuan(Number.MAX_SAFE_INTEGER)} yuan`);
      }
      return [{ type: "AccountCredited", data: { amountMicros: command.amountMicros, ...(command.note ? { note: command.note } : {}) } }];
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
