import { describe, expect, it } from "vitest";
import type { LedgerEvent, NewLedgerEvent } from "../contracts/ledger.ts";
import { applyLedgerEvent, decideGroup, decideLedger, emptyAccount, InsufficientBalanceError, type AccountState, type LedgerCommand } from "../services/billing/account.ts";
import { UnprocessableError, ValidationError } from "../services/shared/errors.ts";
import { deciderSpecification } from "./helpers/deciderSpecification.ts";

const ACCOUNT = "acme";
const NOW = "2026-01-01T00:10:00.000Z";
const BEFORE_NOW = "2026-01-01T00:05:00.000Z";
const AFTER_NOW = "2026-01-01T00:40:00.000Z";

let version = 0;
const stamp = (event: NewLedgerEvent): LedgerEvent => ({ ...event, meta: { schema: 1, account: ACCOUNT, version: ++version, at: BEFORE_NOW, cause: `c${version}` } }) as LedgerEvent;

/** The account decider in emmett's shape, deciding at NOW. */
const spec = deciderSpecification<AccountState, LedgerCommand, NewLedgerEvent, NewLedgerEvent>({
  initialState: () => emptyAccount(ACCOUNT),
  evolve: (state, event) => applyLedgerEvent(state, stamp(event)),
  decide: (command, state) => decideLedger(state, command, NOW),
});
const given = spec.given;
const refused = (history: NewLedgerEvent[], command: LedgerCommand): unknown => {
  const state = history.map(stamp).reduce(applyLedgerEvent, emptyAccount(ACCOUNT));
  try {
    decideLedger(state, command, NOW);
  } catch (error) {
    return error;
  }
  return undefined;
};

const opened: NewLedgerEvent = { type: "AccountOpened", data: {} };
const credited = (amountMicros: number, creditId?: string): NewLedgerEvent => ({ type: "AccountCredited", data: { amountMicros, ...(creditId ? { creditId } : {}) } });
const limit = (limitMicros: number): NewLedgerEvent => ({ type: "CreditLimitSet", data: { limitMicros } });
const held = (requestId: string, amountMicros: number, expiresAt = AFTER_NOW): NewLedgerEvent => ({ type: "ChatReserved", data: { requestId, model: "gpt", amountMicros, expiresAt } });
const reserveChat = (requestId: string, amountMicros: number): LedgerCommand => ({ type: "reserveChat", requestId, model: "gpt", amountMicros, expiresAt: AFTER_NOW });
const chargeChat = (requestId: string, costMicros: number, counted = false): LedgerCommand => ({
  type: "chargeChat",
  requestId,
  model: "gpt",
  promptTokens: 10,
  completionTokens: 20,
  costMicros,
  ...(counted ? { counted } : {}),
});
const charged = (requestId: string, costMicros: number, extra: Record<string, unknown> = {}): NewLedgerEvent =>
  ({ type: "ChatUsageCharged", data: { requestId, model: "gpt", promptTokens: 10, completionTokens: 20, costMicros, ...extra } }) as NewLedgerEvent;

describe("chat holds: reserve before relaying", () => {
  it("given money, when a chat is reserved, then its hold is written with its expiry", () =>
    given([opened, credited(1_000)]).when(reserveChat("r1", 600)).then([held("r1", 600)]));

  it("given holds that take the money, when another chat is reserved, then it is refused (OpenAI's insufficient_quota)", () => {
    const error = refused([opened, credited(1_000), held("r1", 600)], reserveChat("r2", 600));
    expect(error).toBeInstanceOf(InsufficientBalanceError);
    expect((error as Error).message).toMatch(/needs 0.000600 yuan, available 0.000400/);
  });

  it("given a credit limit, when a chat is reserved past the balance but within the limit, then it is held", () =>
    given([opened, credited(100), limit(500)]).when(reserveChat("r1", 600)).then([held("r1", 600)]));

  it("given a hold of the same request, when it is reserved again, then nothing is added", () =>
    given([opened, credited(1_000), held("r1", 600)]).when(reserveChat("r1", 600)).thenNothing());

  it("given a hold past its expiry (its edge crashed), when a chat is reserved, then that money counts as free again", () =>
    given([opened, credited(1_000), held("old", 1_000, BEFORE_NOW)]).when(reserveChat("r2", 800)).then([held("r2", 800)]));
});

describe("chat charges close the hold, and never pass the credit limit", () => {
  it("given a hold, when the usage is charged, then the charge closes it", () =>
    given([opened, credited(1_000), held("r1", 600)]).when(chargeChat("r1", 450)).then([charged("r1", 450, { reservedMicros: 600 })]));

  it("given a hold, when the tokens were counted by reelay, then the charge says so", () =>
    given([opened, credited(1_000), held("r1", 600)]).when(chargeChat("r1", 30, true)).then([charged("r1", 30, { reservedMicros: 600, counted: true })]));

  it("given usage beyond the hold and the balance, when charged, then the account pays down to its credit limit and the rest is uncollected", () =>
    given([opened, credited(1_000), limit(200), held("r1", 600)])
      .when(chargeChat("r1", 5_000))
      .then([charged("r1", 1_200, { reservedMicros: 600, uncollectedMicros: 3_800 })]));

  it("given another request's hold, when a charge runs over, then that hold's money is not taken", () =>
    given([opened, credited(1_000), held("r1", 500), held("r2", 500)])
      .when(chargeChat("r1", 900))
      .then([charged("r1", 500, { reservedMicros: 500, uncollectedMicros: 400 })]));
});

describe("credits with an Idempotency-Key land once", () => {
  const keyed = (amountMicros: number): LedgerCommand => ({ type: "credit", amountMicros, creditId: "k1", keyed: true });

  it("given no credit with the key, when credited, then the credit carries its id", () => given([opened]).when(keyed(5)).then([credited(5, "k1")]));

  it("given a credit with the key, when the same credit comes again (any time later), then nothing is added", () =>
    given([opened, credited(5, "k1")]).when(keyed(5)).thenNothing());

  it("given a credit with the key, when another amount comes with it, then it is refused (422)", () =>
    expect(refused([opened, credited(5, "k1")], keyed(6))).toBeInstanceOf(UnprocessableError));
});

describe("the credit limit bounds video reservations too", () => {
  it("given a limit, when a task reserves past the balance within it, then it is reserved", () =>
    given([opened, limit(1_000)]).when({ type: "reserve", taskId: 1, amountMicros: 1_000 }).then([{ type: "CostReserved", data: { taskId: 1, amountMicros: 1_000 } }]));

  it("given a limit, when a task reserves past it, then it is refused", () =>
    expect(refused([opened, limit(1_000)], { type: "reserve", taskId: 1, amountMicros: 1_001 })).toBeInstanceOf(InsufficientBalanceError));

  it("given debt, when the limit is set below what the account owes and holds, then it is refused", () =>
    expect(refused([opened, limit(1_000), held("r1", 600)], { type: "setCreditLimit", limitMicros: 500, changeId: "x" })).toBeInstanceOf(ValidationError));

  it("given debt, when the limit is set to exactly what is owed and held, then spending stops there", () =>
    given([opened, limit(1_000), held("r1", 600)]).when({ type: "setCreditLimit", limitMicros: 600, changeId: "x" }).then([{ type: "CreditLimitSet", data: { limitMicros: 600 } }]));

  it("given a limit, when the same limit is set again, then nothing is added", () =>
    given([opened, limit(1_000)]).when({ type: "setCreditLimit", limitMicros: 1_000, changeId: "x" }).thenNothing());
});

describe("expired holds are closed by the account's next write", () => {
  it("a group that writes closes expired holds first; one that writes nothing writes no lapse alone", () => {
    const state = [opened, credited(1_000), held("old", 300, BEFORE_NOW)].map(stamp).reduce(applyLedgerEvent, emptyAccount(ACCOUNT));
    const { events } = decideGroup(state, [reserveChat("r2", 100)], NOW);
    expect(events.map((event) => event.type)).toEqual(["ChatReservationLapsed", "ChatReserved"]);
    expect(decideGroup(state, [{ type: "open" }], NOW).events).toEqual([]);
  });

  it("a task's opening holds its reservation alone: no lapse rides with it", () => {
    const state = [opened, credited(1_000), held("old", 300, BEFORE_NOW)].map(stamp).reduce(applyLedgerEvent, emptyAccount(ACCOUNT));
    const { events } = decideGroup(state, [{ type: "reserve", taskId: 9, amountMicros: 1_000 }], NOW);
    expect(events.map((event) => event.type)).toEqual(["CostReserved"]);
  });
});
