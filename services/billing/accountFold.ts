import { MONEY_EPOCH_OPENINGS, type AccountBalance, type LedgerEvent } from "../../contracts/ledger.ts";

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
  /** The money epoch the account's next write goes to (contracts/ledger.ts), and the openings it holds so far. */
  epoch: number;
  epochOpenings: number;
  /** The stream sequence of the epoch's last message, 0 while it has none: the guard of the next write. */
  epochSequence: number;
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
  epoch: 0,
  epochOpenings: 0,
  epochSequence: 0,
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
export type IndexChange =
  | { index: "tasks"; key: number; value: number | undefined }
  | { index: "chats"; key: string; value: ChatHold | undefined }
  | { index: "credits"; key: string; value: number };

export function indexChange(event: LedgerEvent): IndexChange | undefined {
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
export interface Indexes {
  reservations: { set(key: number, value: number): unknown; delete(key: number): unknown };
  chatReservations: { set(key: string, value: ChatHold): unknown; delete(key: string): unknown };
  credits: { set(key: string, value: number): unknown };
}

export function applyIndexChange(indexes: Indexes, change: IndexChange | undefined): void {
  if (!change) return;
  if (change.index === "tasks") {
    if (change.value === undefined) indexes.reservations.delete(change.key);
    else indexes.reservations.set(change.key, change.value);
  } else if (change.index === "chats") {
    if (change.value === undefined) indexes.chatReservations.delete(change.key);
    else indexes.chatReservations.set(change.key, change.value);
  } else indexes.credits.set(change.key, change.value);
}

/** Folds one event into the writer's state: new totals, indexes updated in place, the epoch's openings counted. */
export function applyLedgerEvent(state: AccountState, event: LedgerEvent): AccountState {
  applyIndexChange(state, indexChange(event));
  const totals = applyToTotals(state, event);
  return event.type === "CostReserved" ? countOpening(totals) : totals;
}

/** An opening is a message of its own: the one that fills an epoch ends it, and the next epoch starts empty. */
function countOpening(state: AccountState): AccountState {
  const openings = state.epochOpenings + 1;
  return openings < MONEY_EPOCH_OPENINGS ? { ...state, epochOpenings: openings } : { ...state, epoch: state.epoch + 1, epochOpenings: 0, epochSequence: 0 };
}

/**
 * Folds one money message (its events; a group commit holds several) at stream `sequence` into the writer's
 * state: read on from there, and guard the next write with it unless that message ended its epoch (the next
 * one is empty).
 */
export function applyMoneyMessage(state: AccountState, events: readonly LedgerEvent[], sequence: number): AccountState {
  const after = events.reduce(applyLedgerEvent, state);
  return { ...after, sequence, epochSequence: after.epoch === state.epoch ? sequence : 0 };
}

/** A chat hold stops holding money at its expiry, whether or not its lapse was written yet. */
export const expired = (hold: ChatHold, at: string): boolean => hold.expiresAt <= at;
