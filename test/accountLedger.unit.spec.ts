import { describe, expect, it } from "vitest";
import type { LedgerEvent, NewLedgerEvent } from "../contracts/ledger.ts";
import {
  applyLedgerEvent,
  availableMicros,
  causeOf,
  decideGroup,
  decideLedger,
  emptyAccount,
  InsufficientBalanceError,
  type AccountState,
  type LedgerCommand,
} from "../services/billing/account.ts";
import { ForbiddenError } from "../services/shared/errors.ts";

const ACCOUNT = "acme";
const NOW = "2025-01-01T00:00:00.000Z";

/** Stamps meta the way AccountLedger does: versions 1, 2, 3… in order. */
function stamp(events: NewLedgerEvent[], startVersion = 1): LedgerEvent[] {
  return events.map((event, index) => ({
    ...event,
    meta: { schema: 1, account: ACCOUNT, version: startVersion + index, at: `2025-01-01T00:00:0${index % 10}.000Z`, cause: `c${index}` },
  }) as LedgerEvent);
}

const fold = (events: LedgerEvent[]): AccountState => events.reduce(applyLedgerEvent, emptyAccount(ACCOUNT));

/** Given these events, when this command: the new events, and the account after them. */
function given(...history: NewLedgerEvent[]) {
  const state = fold(stamp(history));
  return {
    state,
    when(command: LedgerCommand) {
      const events = decideLedger(state, command, NOW);
      return { events, after: fold(stamp([...history, ...events])) };
    },
  };
}

const opened: NewLedgerEvent = { type: "AccountOpened", data: {} };
const credited = (amountMicros: number): NewLedgerEvent => ({ type: "AccountCredited", data: { amountMicros } });
const reserved = (taskId: number, amountMicros: number): NewLedgerEvent => ({ type: "CostReserved", data: { taskId, amountMicros } });
const settled = (taskId: number, reservedMicros: number, costMicros: number): NewLedgerEvent => ({
  type: "ReservationSettled",
  data: { taskId, reservedMicros, costMicros, totalTokens: 1000, model: "VideoModel-2.0" },
});
const released = (taskId: number, reservedMicros: number): NewLedgerEvent => ({
  type: "ReservationReleased",
  data: { taskId, reservedMicros, reason: "generation failed" },
});

const reserve = (taskId: number, amountMicros: number): LedgerCommand => ({ type: "reserve", taskId, amountMicros });
const settle = (taskId: number, costMicros: number): LedgerCommand => ({ type: "settle", taskId, costMicros, totalTokens: 1000, model: "VideoModel-2.0" });
const release = (taskId: number): LedgerCommand => ({ type: "release", taskId, reason: "generation failed" });

describe("account decider: open and credit", () => {
  it("opens an account that does not exist yet", () => {
    const { events, after } = given().when({ type: "open" });
    expect(events).toEqual([opened]);
    expect(after).toMatchObject({ exists: true, balanceMicros: 0, reservedMicros: 0, version: 1 });
  });

  it("opens an account once: opening it again adds nothing", () => {
    expect(given(opened).when({ type: "open" }).events).toEqual([]);
  });

  it("credit adds to the balance and the available amount", () => {
    const { events, after } = given(opened, credited(1_000_000)).when({ type: "credit", amountMicros: 2_500_000, creditId: "x", note: "top-up" });
    expect(events).toEqual([{ type: "AccountCredited", data: { amountMicros: 2_500_000, note: "top-up" } }]);
    expect(after.balanceMicros).toBe(3_500_000);
    expect(availableMicros(after)).toBe(3_500_000);
  });

  it("refuses a credit that would take the balance past 2^53 micro-yuan (no longer exact)", () => {
    const credit: LedgerCommand = { type: "credit", amountMicros: 2, creditId: "x" };
    expect(() => given(opened, credited(Number.MAX_SAFE_INTEGER - 1)).when(credit)).toThrow(/balance would exceed 9007199254.740991 yuan/);
    expect(given(opened, credited(Number.MAX_SAFE_INTEGER - 2)).when(credit).after.balanceMicros).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("each credit is its own movement (idempotency comes from the credit id as msgID, not the decider)", () => {
    const credit: LedgerCommand = { type: "credit", amountMicros: 1, creditId: "order-7" };
    expect(given(opened, credited(1)).when(credit).events).toHaveLength(1);
    expect(causeOf(credit, ACCOUNT)).toBe("credit-order-7");
  });
});

describe("account decider: reserve", () => {
  it("reserves the estimate: balance stays, reserved grows, available shrinks", () => {
    const { events, after } = given(opened, credited(10_000_000)).when(reserve(1, 5_009_400));
    expect(events).toEqual([reserved(1, 5_009_400)]);
    expect(after).toMatchObject({ balanceMicros: 10_000_000, reservedMicros: 5_009_400, openReservations: 1, reservations: new Map([[1, 5_009_400]]) });
    expect(availableMicros(after)).toBe(4_990_600);
  });

  it("may reserve exactly what is available", () => {
    expect(given(opened, credited(5_009_400)).when(reserve(1, 5_009_400)).events).toEqual([reserved(1, 5_009_400)]);
  });

  it("refuses with InsufficientBalanceError (a 403) naming insufficient balance when available < amount", () => {
    const { state } = given(opened, credited(10_000_000), reserved(1, 6_000_000));
    let error: unknown;
    try {
      decideLedger(state, reserve(2, 5_000_000), NOW);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(InsufficientBalanceError);
    expect(error).toBeInstanceOf(ForbiddenError);
    expect((error as InsufficientBalanceError).status).toBe(403);
    expect((error as Error).message).toBe("insufficient balance: this task needs 5.000000 yuan, available 4.000000");
  });

  it("refuses on an account with no money at all", () => {
    expect(() => given(opened).when(reserve(1, 1))).toThrow(/insufficient balance/);
  });

  it("a second reserve of the same task adds nothing (and is not refused even if the money is gone)", () => {
    const { events, after } = given(opened, credited(5_000_000), reserved(1, 5_000_000)).when(reserve(1, 5_000_000));
    expect(events).toEqual([]);
    expect(after.reservedMicros).toBe(5_000_000);
  });
});

describe("account decider: settle", () => {
  const history = [opened, credited(10_000_000), reserved(7, 5_009_400)];

  it("charges the real cost and frees the whole reservation", () => {
    const { events, after } = given(...history).when(settle(7, 4_000_000));
    expect(events).toEqual([settled(7, 5_009_400, 4_000_000)]);
    expect(after).toMatchObject({ balanceMicros: 6_000_000, reservedMicros: 0, openReservations: 0, reservations: new Map() });
    expect(availableMicros(after)).toBe(6_000_000);
  });

  it("a second settle of the same task adds nothing: a redelivered success charges once", () => {
    const { events, after } = given(...history, settled(7, 5_009_400, 5_009_400)).when(settle(7, 5_009_400));
    expect(events).toEqual([]);
    expect(after.balanceMicros).toBe(10_000_000 - 5_009_400);
  });

  it("settling a task that never reserved adds nothing", () => {
    expect(given(opened, credited(1)).when(settle(99, 1)).events).toEqual([]);
  });

  it("charges a cost above the estimate as far as the account can pay (credit limit 0: down to zero); the rest is uncollected, the house's loss", () => {
    const { events, after } = given(opened, credited(5_009_400), reserved(7, 5_009_400)).when(settle(7, 6_000_000));
    expect(events).toEqual([{ type: "ReservationSettled", data: { taskId: 7, reservedMicros: 5_009_400, costMicros: 5_009_400, totalTokens: 1000, model: "VideoModel-2.0", uncollectedMicros: 990_600 } }]);
    expect(after).toMatchObject({ balanceMicros: 0, reservedMicros: 0 });
  });

  it("charges a cost above the estimate in full while the account's money covers it", () => {
    const { events, after } = given(opened, credited(10_000_000), reserved(7, 5_009_400)).when(settle(7, 6_000_000));
    expect(events).toEqual([settled(7, 5_009_400, 6_000_000)]);
    expect(after).toMatchObject({ balanceMicros: 4_000_000, reservedMicros: 0 });
  });

  it("settles only its own task: other reservations stay", () => {
    const { after } = given(...history, reserved(8, 1_000_000)).when(settle(7, 5_009_400));
    expect(after).toMatchObject({ reservedMicros: 1_000_000, openReservations: 1, reservations: new Map([[8, 1_000_000]]) });
  });
});

describe("account decider: release", () => {
  const history = [opened, credited(10_000_000), reserved(7, 5_009_400)];

  it("frees the reservation without charging: failed work is free", () => {
    const { events, after } = given(...history).when(release(7));
    expect(events).toEqual([released(7, 5_009_400)]);
    expect(after).toMatchObject({ balanceMicros: 10_000_000, reservedMicros: 0, openReservations: 0, reservations: new Map() });
  });

  it("a second release adds nothing", () => {
    expect(given(...history, released(7, 5_009_400)).when(release(7)).events).toEqual([]);
  });

  it("release after settle adds nothing, and settle after release adds nothing: a task ends once", () => {
    expect(given(...history, settled(7, 5_009_400, 5_009_400)).when(release(7)).events).toEqual([]);
    expect(given(...history, released(7, 5_009_400)).when(settle(7, 5_009_400)).events).toEqual([]);
  });
});

describe("account decider: chat usage", () => {
  it("charges the chat cost straight from the balance", () => {
    const command: LedgerCommand = { type: "chargeChat", requestId: "req-1", model: "gpt-4o-mini", promptTokens: 10, completionTokens: 20, costMicros: 99 };
    const { events, after } = given(opened, credited(1_000)).when(command);
    expect(events).toEqual([
      { type: "ChatUsageCharged", data: { requestId: "req-1", model: "gpt-4o-mini", promptTokens: 10, completionTokens: 20, costMicros: 99 } },
    ]);
    expect(after).toMatchObject({ balanceMicros: 901, reservedMicros: 0 });
    expect(causeOf(command, ACCOUNT)).toBe("chat-req-1");
  });
});

describe("causes (publish msgIDs) are derived from what caused the movement", () => {
  it("names one cause per task and kind of movement", () => {
    expect(causeOf({ type: "open" }, ACCOUNT)).toBe("open-acme");
    expect(causeOf(reserve(5, 1), ACCOUNT)).toBe("reserve-task-5");
    expect(causeOf(settle(5, 1), ACCOUNT)).toBe("settle-task-5");
    expect(causeOf(release(5), ACCOUNT)).toBe("release-task-5");
  });
});

describe("account decider: a group of task commands written as one message", () => {
  const AT = "2025-01-01T00:00:00.000Z";
  /** Given these events, when these commands together: each one's outcome, and all the new events. */
  const givenGroup = (...history: NewLedgerEvent[]) => ({
    when: (...commands: LedgerCommand[]) => {
      const state = fold(stamp(history));
      const reservationsBefore = [...state.reservations];
      const decision = decideGroup(state, commands, AT);
      // Deciding never touches the fold it decides on: a lost race decides again from the same state.
      expect([...state.reservations]).toEqual(reservationsBefore);
      return { ...decision, after: decision.events.reduce(applyLedgerEvent, fold(stamp(history))) };
    },
  });

  it("given 10 yuan, when three 4-yuan reserves come together, then two are written and the third is refused: the group never overspends", () => {
    const { outcomes, events, after } = givenGroup(opened, credited(10_000_000)).when(reserve(1, 4_000_000), reserve(2, 4_000_000), reserve(3, 4_000_000));
    expect(events.map((event) => event.type)).toEqual(["CostReserved", "CostReserved"]);
    const third = outcomes[2];
    expect(third && "refused" in third ? third.refused : undefined).toBeInstanceOf(InsufficientBalanceError);
    expect(availableMicros(after)).toBe(2_000_000);
  });

  it("numbers the group's events on from the account's version, each with its own command's cause", () => {
    const { events } = givenGroup(opened, credited(10_000_000)).when(reserve(1, 1), reserve(2, 1));
    expect(events.map((event) => [event.meta.version, event.meta.cause, event.meta.at])).toEqual([
      [3, "reserve-task-1", AT],
      [4, "reserve-task-2", AT],
    ]);
  });

  it("sees its own earlier commands: a reserve then a release of the same task, and a repeated settle that adds nothing", () => {
    const { events, after } = givenGroup(opened, credited(10_000_000), reserved(5, 2_000_000)).when(reserve(6, 3_000_000), release(6), settle(5, 1_000_000), settle(5, 1_000_000));
    expect(events.map((event) => event.type)).toEqual(["CostReserved", "ReservationReleased", "ReservationSettled"]);
    expect(after.reservations.size).toBe(0);
    expect(after.balanceMicros).toBe(9_000_000);
  });

  it("a refused command in the middle stops nothing after it", () => {
    const { outcomes, events } = givenGroup(opened, credited(1_000_000)).when(reserve(1, 5_000_000), reserve(2, 500_000));
    expect(outcomes.map((outcome) => ("refused" in outcome ? "refused" : outcome.events.length))).toEqual(["refused", 1]);
    expect(events).toHaveLength(1);
  });
});
