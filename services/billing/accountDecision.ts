import type { AccountBalance, NewLedgerEvent } from "../../contracts/ledger.ts";
import { ForbiddenError, UnprocessableError, ValidationError } from "../shared/errors.ts";
import { availableMicros, expired, type ChatHold } from "./accountFold.ts";
import { formatYuan } from "./pricing.ts";

/*
 * What a command adds to an account's ledger, decided on the folded account (accountFold.ts): one command at a
 * time here, several at once in accountGroup.ts.
 */

export type LedgerCommand =
  | { type: "open" }
  /** `keyed`: the id comes from an Idempotency-Key, so the account remembers it (a retry lands once, however late). */
  | { type: "credit"; amountMicros: number; creditId: string; keyed?: boolean; note?: string; actor?: string }
  | { type: "setCreditLimit"; limitMicros: number; changeId: string; actor?: string }
  | { type: "reserve"; taskId: number; amountMicros: number }
  | { type: "settle"; taskId: number; costMicros: number; totalTokens: number; model: string }
  | { type: "release"; taskId: number; reason: string }
  | { type: "reserveChat"; requestId: string; model: string; amountMicros: number; expiresAt: string }
  /** `counted`: no upstream usage, the tokens were counted from what was relayed. */
  | { type: "chargeChat"; requestId: string; model: string; promptTokens: number; completionTokens: number; costMicros: number; counted?: boolean };

/** What deciding needs: the totals, the indexes (read only), and the time of the decision (chat holds expire). */
export interface DecidingState extends AccountBalance {
  reservations: { get(taskId: number): number | undefined };
  chatReservations: { get(requestId: string): ChatHold | undefined; entries(): Iterable<[string, ChatHold]> };
  credits: { get(creditId: string): number | undefined };
}

/**
 * Commands whose repeats the decider itself absorbs (a task's reservation is closed once), so several can
 * share one message. Credits and chat charges rely on their cause as the message's msgID to land once, and a
 * reservation is a task's opening (its own subject), so each of those is a message of its own.
 */
export const isGroupable = (command: LedgerCommand): boolean => command.type === "settle" || command.type === "release";

/** Create answers 403 (chat: OpenAI's 429 insufficient_quota) naming the shortfall; nothing is reserved. */
export class InsufficientBalanceError extends ForbiddenError {}

/** The cause of a command: also its publish msgID, so a retried command is written once. */
export function causeOf(command: LedgerCommand, account: string): string {
  switch (command.type) {
    case "open":
      return `open-${account}`;
    case "credit":
      return `credit-${command.creditId}`;
    case "setCreditLimit":
      return `credit-limit-${command.changeId}`;
    case "reserve":
      return `reserve-task-${command.taskId}`;
    case "settle":
      return `settle-task-${command.taskId}`;
    case "release":
      return `release-task-${command.taskId}`;
    case "reserveChat":
      return `reserve-chat-${command.requestId}`;
    case "chargeChat":
      return `chat-${command.requestId}`;
  }
}

/** Money the account's chat holds past their expiry still count in `reservedMicros` (until a lapse is written). */
function expiredHoldMicros(state: DecidingState, at: string): number {
  let micros = 0;
  for (const [, hold] of state.chatReservations.entries()) if (expired(hold, at)) micros += hold.amountMicros;
  return micros;
}

/** What may be spent at `at`: available money, with holds past their expiry no longer holding any. */
const spendableMicros = (state: DecidingState, at: string): number => availableMicros(state) + expiredHoldMicros(state, at);

function refuseShort(what: string, amountMicros: number, spendable: number): never {
  throw new InsufficientBalanceError(`insufficient balance: ${what} needs ${formatYuan(amountMicros)} yuan, available ${formatYuan(Math.max(spendable, 0))}`);
}

/**
 * What a command adds to the ledger, given the account at time `at` (ISO). Settling or releasing a task without
 * an open reservation adds nothing: that is what makes redelivered successes and failures charge once.
 * Every reservation (a task's, a chat request's) must fit in balance − held + credit limit: with every write
 * guarded, that bounds the account's debt by its credit limit under any concurrency.
 */
export function decideLedger(state: DecidingState, command: LedgerCommand, at: string): NewLedgerEvent[] {
  switch (command.type) {
    case "open":
      return state.exists ? [] : [{ type: "AccountOpened", data: {} }];
    case "credit": {
      if (command.keyed) {
        const earlier = state.credits.get(command.creditId);
        if (earlier === command.amountMicros) return [];
        if (earlier !== undefined) {
          throw new UnprocessableError(`Idempotency-Key was already used for a credit of ${formatYuan(earlier)} yuan: a key names one credit`);
        }
      }
      // A balance past 2^53 µ¥ is no longer exact, and the read model's schema would refuse it for good.
      if (!Number.isSafeInteger(state.balanceMicros + command.amountMicros)) {
        throw new ValidationError(`credit refused: the balance would exceed ${formatYuan(Number.MAX_SAFE_INTEGER)} yuan`);
      }
      const { amountMicros, note, actor } = command;
      return [{ type: "AccountCredited", data: { amountMicros, ...(note ? { note } : {}), ...(actor ? { actor } : {}), ...(command.keyed ? { creditId: command.creditId } : {}) } }];
    }
    case "setCreditLimit": {
      if (state.creditLimitMicros === command.limitMicros) return [];
      // Below what the account already owes and holds, the balance would stand under its limit: every charge
      // it was promised (its holds) must stay payable. Stop its spending with a limit of exactly that.
      const owed = state.reservedMicros - state.balanceMicros;
      if (command.limitMicros < owed) {
        throw new ValidationError(`credit limit refused: the account owes and holds ${formatYuan(owed)} yuan; the limit cannot be less`);
      }
      return [{ type: "CreditLimitSet", data: { limitMicros: command.limitMicros, ...(command.actor ? { actor: command.actor } : {}) } }];
    }
    case "reserve": {
      if (state.reservations.get(command.taskId) !== undefined) return [];
      const spendable = spendableMicros(state, at);
      if (spendable < command.amountMicros) refuseShort("this task", command.amountMicros, spendable);
      return [{ type: "CostReserved", data: { taskId: command.taskId, amountMicros: command.amountMicros } }];
    }
    case "settle": {
      const open = state.reservations.get(command.taskId);
      if (open === undefined) return [];
      // As a chat's charge: the real cost, as far as the account can pay without passing its credit limit (its own
      // reservation included); an upstream that reported more than that is the house's loss, never the account's debt.
      const charged = Math.min(command.costMicros, Math.max(spendableMicros(state, at) + open, 0));
      const { taskId, totalTokens, model } = command;
      return [
        {
          type: "ReservationSettled",
          data: { taskId, reservedMicros: open, costMicros: charged, totalTokens, model, ...(charged < command.costMicros ? { uncollectedMicros: command.costMicros - charged } : {}) },
        },
      ];
    }
    case "release": {
      const open = state.reservations.get(command.taskId);
      if (open === undefined) return [];
      return [{ type: "ReservationReleased", data: { taskId: command.taskId, reservedMicros: open, reason: command.reason } }];
    }
    case "reserveChat": {
      if (state.chatReservations.get(command.requestId) !== undefined) return [];
      const spendable = spendableMicros(state, at);
      if (spendable < command.amountMicros) refuseShort("this chat request (its prompt and longest answer)", command.amountMicros, spendable);
      const { requestId, model, amountMicros, expiresAt } = command;
      return [{ type: "ChatReserved", data: { requestId, model, amountMicros, expiresAt } }];
    }
    case "chargeChat":
      return [chatCharge(state, command, at)];
  }
}

/**
 * A chat request's charge, closing its hold. The usage is charged as far as the account can pay without passing
 * its credit limit (its own hold included); anything beyond — an upstream that answered more than was reserved,
 * a hold that lapsed — is recorded as uncollected, the house's loss, never the account's debt.
 */
function chatCharge(state: DecidingState, command: Extract<LedgerCommand, { type: "chargeChat" }>, at: string): NewLedgerEvent {
  const { requestId, model, promptTokens, completionTokens, costMicros, counted } = command;
  const hold = state.chatReservations.get(requestId);
  const headroom = spendableMicros(state, at) + (hold && !expired(hold, at) ? hold.amountMicros : 0);
  const charged = Math.min(costMicros, Math.max(headroom, 0));
  return {
    type: "ChatUsageCharged",
    data: {
      requestId,
      model,
      promptTokens,
      completionTokens,
      costMicros: charged,
      ...(hold ? { reservedMicros: hold.amountMicros } : {}),
      ...(counted ? { counted } : {}),
      ...(charged < costMicros ? { uncollectedMicros: costMicros - charged } : {}),
    },
  };
}
