import { z } from "zod";
import { AccountName } from "./apiKey.ts";

/**
 * Money is integer micro-yuan (1 yuan = 1,000,000 µ¥): decimal yuan with up to 6 places is exact,
 * and sums never pick up floating-point error.
 */
export const Micros = z.number().int().safe();
export const MICROS_PER_YUAN = 1_000_000;

const LedgerMeta = z.object({
  schema: z.literal(1),
  account: AccountName,
  /** Position in the account's history, starting at 1. */
  version: z.number().int().positive(),
  at: z.string(),
  /** What caused this movement (`task-42`, `credit-…`, `chat-…`); also the publish msgID, so a retry lands once. */
  cause: z.string(),
});
export type LedgerMeta = z.infer<typeof LedgerMeta>;

const event = <T extends string, D extends z.ZodRawShape>(type: T, data: D) =>
  z.object({ type: z.literal(type), data: z.object(data), meta: LedgerMeta });

export const AccountOpened = event("AccountOpened", {});
export const AccountCredited = event("AccountCredited", {
  amountMicros: Micros.positive(),
  note: z.string().optional(),
  /** Who credited it: the admin token's name, for credits made through the admin API. */
  actor: z.string().optional(),
  /** Set when the credit came with an Idempotency-Key (derived from it): the account's fold refuses a second credit with it. */
  creditId: z.string().optional(),
});
/** The debt the account may run into (balance + this bounds every reservation); 0 unless set. */
export const CreditLimitSet = event("CreditLimitSet", { limitMicros: Micros.nonnegative(), actor: z.string().optional() });
/**
 * A chat request's money held before relaying: its prompt and the most it may answer, at the model's prices.
 * Closed by its ChatUsageCharged; one an edge never closed (it crashed) stops holding money at `expiresAt` and
 * is closed by the account's next write (ChatReservationLapsed).
 */
export const ChatReserved = event("ChatReserved", {
  requestId: z.string(),
  model: z.string(),
  amountMicros: Micros.nonnegative(),
  expiresAt: z.string(),
});
export const ChatReservationLapsed = event("ChatReservationLapsed", { requestId: z.string(), reservedMicros: Micros.nonnegative() });
export const CostReserved = event("CostReserved", { taskId: z.number().int().positive(), amountMicros: Micros.nonnegative() });
export const ReservationSettled = event("ReservationSettled", {
  taskId: z.number().int().positive(),
  reservedMicros: Micros.nonnegative(),
  /** What the balance paid: the task's real cost, or less when the account's debt bound was reached (see uncollected). */
  costMicros: Micros.nonnegative(),
  totalTokens: z.number().int().nonnegative(),
  model: z.string(),
  /** The part of the real cost past the account's credit limit: the house's loss, not charged. */
  uncollectedMicros: Micros.positive().optional(),
});
export const ReservationReleased = event("ReservationReleased", {
  taskId: z.number().int().positive(),
  reservedMicros: Micros.nonnegative(),
  reason: z.string(),
});
export const ChatUsageCharged = event("ChatUsageCharged", {
  requestId: z.string(),
  model: z.string(),
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  /** What the balance paid: the usage's price, or less when the account's debt bound was reached (see uncollected). */
  costMicros: Micros.nonnegative(),
  /** The reservation this charge closes (absent: charged without one, as before chat reserved, or after it lapsed). */
  reservedMicros: Micros.nonnegative().optional(),
  /** The tokens were counted by reelay from what it relayed: the upstream reported no usage (client gone, upstream omitted it). */
  counted: z.boolean().optional(),
  /** Usage priced beyond what the account could pay without passing its credit limit: the house's loss, for audit. */
  uncollectedMicros: Micros.positive().optional(),
});

export const LedgerEvent = z.discriminatedUnion("type", [
  AccountOpened,
  AccountCredited,
  CostReserved,
  ReservationSettled,
  ReservationReleased,
  ChatUsageCharged,
  ChatReserved,
  ChatReservationLapsed,
  CreditLimitSet,
]);
export type LedgerEvent = z.infer<typeof LedgerEvent>;
export type NewLedgerEvent = { [E in LedgerEvent as E["type"]]: Omit<E, "meta"> }[LedgerEvent["type"]];

/** Read model per account (bucket `balances`): totals only; what each task reserved and cost is in the ledger's own events. */
export const AccountBalance = z.object({
  account: AccountName,
  /** Opened or credited at least once. */
  exists: z.boolean(),
  balanceMicros: Micros,
  reservedMicros: Micros,
  openReservations: z.number().int(),
  /** How far below zero the balance may go (CreditLimitSet). */
  creditLimitMicros: Micros.default(0),
  openedAt: z.string(),
  updatedAt: z.string(),
  /** meta.version of the last event applied. */
  version: z.number().int(),
  /** Stream sequence of the last event applied: where to resume reading. */
  sequence: z.number().int(),
});
export type AccountBalance = z.infer<typeof AccountBalance>;

/**
 * The writer's whole state at a point of the account's history (bucket `ledger_snapshots`), so a
 * process that starts reads only what came after instead of the account's whole history.
 */
export const LedgerSnapshot = AccountBalance.extend({
  /** The account's money epoch (MONEY_EPOCH_OPENINGS), its openings so far, and its last message (0: none yet). */
  epoch: z.number().int().nonnegative(),
  epochOpenings: z.number().int().nonnegative(),
  epochSequence: z.number().int().nonnegative(),
  reservations: z.array(z.tuple([z.number().int().positive(), Micros])),
  chatReservations: z.array(z.tuple([z.string(), z.object({ amountMicros: Micros, expiresAt: z.string() })])).default([]),
  credits: z.array(z.tuple([z.string(), Micros])).default([]),
});
export type LedgerSnapshot = z.infer<typeof LedgerSnapshot>;

/**
 * Every money movement of account A is on a subject under `acct.A.money.<epoch>.`: task openings (which
 * reserve) on `acct.A.money.<epoch>.task.N` (contracts/taskOpening.ts), everything else (credits, settlements,
 * releases, chat charges) on `acct.A.money.<epoch>.ledger`. A write is guarded by the last sequence over its
 * epoch's subjects, so an account's money is decided on everything that moved it.
 *
 * Why epochs: nats-server finds the last sequence over a wildcard by walking every subject under it, and each
 * task opening is a subject of its own, so a guard over all of an account's money would cost the server more
 * with every task the account ever opened (bench/tools/guardGrowth.ts). An epoch holds at most
 * MONEY_EPOCH_OPENINGS openings: the message of its last opening ends it, and every write after goes to the
 * next epoch, whose guard starts from an empty epoch. A writer that has not read that last opening expects an
 * earlier sequence of the full epoch and fails its guard, so no write can land in an epoch after its end.
 * Which epoch a message is in follows from the account's history alone (the openings before it), so every
 * reader and writer agrees on it; the number is part of the store's layout and never changes.
 */
export const MONEY_EPOCH_OPENINGS = 256;
/** The epoch a money message of an account is in, given how many openings the account wrote before it. */
export const moneyEpochAfter = (openings: number): number => Math.floor(openings / MONEY_EPOCH_OPENINGS);
export const ledgerSubject = (account: string, epoch: number): string => `acct.${account}.money.${epoch}.ledger`;
/** The guard and read filter of one epoch of one account's money. */
export const epochMoneySubjects = (account: string, epoch: number): string => `acct.${account}.money.${epoch}.>`;
/** All of one account's money, every epoch (reads that look for one movement, not guards). */
export const moneySubjects = (account: string): string => `acct.${account}.money.>`;
/** Every account's money (the balance projections' filter). */
export const MONEY_EVENTS = "acct.*.money.>";
/** Whether a subject under `acct.A.money.` is a ledger message's (not a task opening's). */
export const isLedgerSubject = (subject: string): boolean => subject.endsWith(".ledger");

/**
 * What one money message holds: one event, or (a group commit) an array of the account's consecutive
 * events written together in one guarded append, or a task's opening, whose `money` part is its reservation.
 * Readers always take a message as a list.
 */
export function ledgerEventsOf(raw: unknown): LedgerEvent[] {
  if (Array.isArray(raw)) {
    if (raw.length === 0) throw new Error("a ledger message holds an empty list of events");
    return raw.map((event) => LedgerEvent.parse(event));
  }
  if (typeof raw === "object" && raw !== null && "money" in raw) return [CostReserved.parse(raw.money)];
  return [LedgerEvent.parse(raw)];
}

/** The body of a message holding `events`: a single event as itself. */
export const ledgerMessageBody = (events: readonly LedgerEvent[]): string => JSON.stringify(events.length === 1 ? events[0] : events);

/** Both directions, for the account logs' readers and writers. */
export const ledgerCodec = { decode: ledgerEventsOf, encode: ledgerMessageBody } as const;
