import type { AccountBalance, LedgerEvent, NewLedgerEvent } from "../../contracts/ledger.ts";
import { ForbiddenError, UnprocessableError, ValidationError } from "../shared/errors.ts";
import { formatYuan } from "./pricing.ts";

/** A chat request's held money and when it stops holding it (an edge that crashed never closes it). */
export interface ChatHold {
  amountMicros: number;
  expiresAt: string;
}

/**
 * An account's money, folded from its ledger events: the totals (also the `balances` read model, folded
 * by the same `applyToTotals`, so the two never disagree on arithmetic) plus the indexes the writer's
 * decisions need: each task's open reservation, each chat request's hold, and the credits made with an
 * Idempotency-Key (id → amount), so a retried credit lands once however late it comes.
 *
 * The indexes are Maps updated in place by `applyLedgerEvent`: copying them for every event would cost
 * O(open tasks) per create. So a fold's earlier states keep their own totals but share the latest indexes;
 * decide only from the newest state.
 */
export interface AccountState extends AccountBalance {
  reservations: Map<number, number>;
  chatReservations: Map<string, ChatHold>;
  credits: Map<string, number>;
}

export const emptyBalance = (account: string): AccountBalance => ({
  account,
  exists: false,
  balanceMicros: 0,
  reservedMicros: 0,
  openReservations: 0,
  creditLimitMicros: 0,
  openedAt: "",
  updatedAt: "",
  version: 0,
  sequence: 0,
});

export const emptyAccount = (account: string): AccountState => ({
  ...emptyBalance(account),
  reservations: new Map(),
  chatReservations: new Map(),
  credits: new Map(),
});

/** What the account may still spend: its balance, less what is held, plus the debt it is allowed (credit limit). */
export const availableMicros = (state: Pick<AccountBalance, "balanceMicros" | "reservedMicros" | "creditLimitMicros">): number =>
  state.balanceMicros - state.reservedMicros + state.creditLimitMicros;

/** Folds one event into the totals. Generic: the writer's state carries its indexes through. */
export function applyToTotals<Totals extends AccountBalance>(totals: Totals, event: LedgerEvent): Totals {
  // One object per event: replay speed is bound by this fold.
  const version = event.meta.version;
  const updatedAt = event.meta.at;
  switch (event.type) {
    case "AccountOpened":
      return { ...totals, version, updatedAt, exists: true, openedAt: event.meta.at };
    case "AccountCredited":
      return { ...totals, version, updatedAt, exists: true, balanceMicros: totals.balanceMicros + event.data.amountMicros };
    case "CreditLimitSet":
      return { ...totals, version, updatedAt, creditLimitMicros: event.data.limitMicros };
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
    case "ChatReserved":
      return { ...totals, version, updatedAt, reservedMicros: totals.reservedMicros + event.data.amountMicros };
    case "ChatReservationLapsed":
      return { ...totals, version, updatedAt, reservedMicros: totals.reservedMicros - event.data.reservedMicros };
    case "ChatUsageCharged":
      return {
        ...totals,
        version,
        updatedAt,
        balanceMicros: totals.balanceMicros - event.data.costMicros,
        reservedMicros: totals.reservedMicros - (event.data.reservedMicros ?? 0),
      };
  }
}

/** What an event does to the indexes: sets an entry (a value) or removes it (undefined). */
type IndexChange =
  | { index: "tasks"; key: number; value: number | undefined }
  | { index: "chats"; key: string; value: ChatHold | undefined }
  | { index: "credits"; key: string; value: number };

function indexChange(event: LedgerEvent): IndexChange | undefined {
  switch (event.type) {
    case "CostReserved":
      return { index: "tasks", key: event.data.taskId, value: event.data.amountMicros };
    case "ReservationSettled":
    case "ReservationReleased":
      return { index: "tasks", key: event.data.taskId, value: undefined };
    case "ChatReserved":
      return { index: "chats", key: event.data.requestId, value: { amountMicros: event.data.amountMicros, expiresAt: event.data.expiresAt } };
    case "ChatReservationLapsed":
      return { index: "chats", key: event.data.requestId, value: undefined };
    case "ChatUsageCharged":
      return event.data.reservedMicros === undefined ? undefined : { index: "chats", key: event.data.requestId, value: undefined };
    case "AccountCredited":
      return event.data.creditId === undefined ? undefined : { index: "credits", key: event.data.creditId, value: event.data.amountMicros };
    default:
      return undefined;
  }
}

/** Where an index change goes: the writer's Maps, or a group decision's overlay of them. */
interface Indexes {
  reservations: { set(key: number, value: number): unknown; delete(key: number): unknown };
  chatReservations: { set(key: string, value: ChatHold): unknown; delete(key: string): unknown };
  credits: { set(key: string, value: number): unknown };
}

function applyIndexChange(indexes: Indexes, change: IndexChange | undefined): void {
  if (!change) return;
  if (change.index === "tasks") {
    if (change.value === undefined) indexes.reservations.delete(change.key);
    else indexes.reservations.set(change.key, change.value);
  } else if (change.index === "chats") {
    if (change.value === undefined) indexes.chatReservations.delete(change.key);
    else indexes.chatReservations.set(change.key, change.value);
  } else indexes.credits.set(change.key, change.value);
}

/** Folds one event into the writer's state: new totals, indexes updated in place. */
export function applyLedgerEvent(state: AccountState, event: LedgerEvent): AccountState {
  applyIndexChange(state, indexChange(event));
  return applyToTotals(state, event);
}

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

const expired = (hold: ChatHold, at: string): boolean => hold.expiresAt <= at;

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
