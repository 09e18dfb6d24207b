import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InsufficientBalanceError } from "../services/billing/account.ts";
import { ValidationError } from "../services/shared/errors.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { creditCommand } from "../services/billing/credits.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { openingEvent } from "./helpers/openTask.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * Issue 32's money invariant, as property: random interleavings of chat requests (answered with the upstream's
 * usage, cut short by a client hang-up, failed before any content, or left open by an edge that crashed), video
 * creates that succeed or fail, credits (some retried under one Idempotency-Key) and credit limit changes, run
 * concurrently through two writers (two edges) on a real nats-server. Whatever the interleaving:
 * - the balance never goes below −credit limit, at any point of the account's history;
 * - balance = credits − delivered usage (what the account paid plus what it could not, recorded as uncollected,
 *   and uncollected only where an answer cost more than its hold);
 * - every hold is closed exactly once (charged, or lapsed after its edge crashed), and nothing stays held.
 */

type Via = 0 | 1;
type Session =
  | { kind: "chat"; via: Via; holdMicros: number; end: "usage" | "hangUp" | "failed" | "crash"; costPermille: number }
  | { kind: "create"; via: Via; estimateMicros: number; succeeds: boolean; costPermille: number }
  | { kind: "credit"; via: Via; amountMicros: number; key: "a" | "b" | undefined }
  | { kind: "limit"; via: Via; limitMicros: number };

const via = fc.constantFrom<Via>(0, 1);
const session: fc.Arbitrary<Session> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("chat" as const),
      via,
      holdMicros: fc.integer({ min: 1, max: 3_000 }),
      end: fc.constantFrom("usage" as const, "hangUp" as const, "failed" as const, "crash" as const),
      // Usage may exceed the hold (an upstream answering more than was reserved): up to 3×.
      costPermille: fc.integer({ min: 0, max: 3_000 }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("create" as const), via, estimateMicros: fc.integer({ min: 1, max: 4_000 }), succeeds: fc.boolean(), costPermille: fc.integer({ min: 0, max: 1_000 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("credit" as const), via, amountMicros: fc.integer({ min: 1, max: 5_000 }), key: fc.constantFrom("a" as const, "b" as const, undefined) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("limit" as const), via, limitMicros: fc.integer({ min: 0, max: 3_000 }) }) },
);
/** Sessions run in waves; the sessions of one wave run at once. */
const scenario = fc.array(fc.array(session, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 6 });

/** Keyed credits always carry the same amount per key: a retry, not another credit. */
const KEYED_AMOUNT = { a: 2_500, b: 700 } as const;
const CRASH_TTL_MS = 40;

describe("adversarial money: the invariant holds under random interleavings of chats, hang-ups, creates, failures and credits", () => {
  let app: TestApp;
  let writers: [AccountLedger, AccountLedger];
  let run = 0;
  let taskIds = 1_000;

  beforeAll(async () => {
    app = await startTestApp({ services: [] });
    writers = [new AccountLedger(app.nats), new AccountLedger(app.nats)];
  });
  afterAll(async () => {
    await app?.stop();
  });

  it("balance = credits − delivered usage, never below −credit limit, every hold closed once", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (waves) => {
        const account = `inv${++run}`;
        await writers[0].execute(account, { type: "open" });
        const credited = new Set<string>();
        let credits = 0;
        /** What each chat that got its hold asked to be charged, and its hold. */
        const asked = new Map<string, { cost: number; hold: number }>();
        const crashed = new Set<string>();
        let settled = 0;
        let serial = 0;

        const play = async (s: Session): Promise<void> => {
          const writer = writers[s.via];
          switch (s.kind) {
            case "credit": {
              const amount = s.key ? KEYED_AMOUNT[s.key] : s.amountMicros;
              await writer.execute(account, creditCommand(account, amount, { idempotencyKey: s.key, note: "property" }));
              if (!s.key || !credited.has(s.key)) credits += amount;
              if (s.key) credited.add(s.key);
              return;
            }
            case "limit":
              // Refused (ValidationError) below what the account owes and holds at that moment.
              await writer.execute(account, { type: "setCreditLimit", limitMicros: s.limitMicros, changeId: `${account}-${++serial}` }).catch((error: unknown) => {
                if (!(error instanceof ValidationError)) throw error;
              });
              return;
            case "chat": {
              const requestId = `${account}-chat-${++serial}`;
              const expiresAt = new Date(Date.now() + (s.end === "crash" ? CRASH_TTL_MS : 60_000)).toISOString();
              try {
                await writer.execute(account, { type: "reserveChat", requestId, model: "m", amountMicros: s.holdMicros, expiresAt });
              } catch (error) {
                if (error instanceof InsufficientBalanceError) return;
                throw error;
              }
              if (s.end === "crash") {
                crashed.add(requestId);
                return;
              }
              await sleep(0);
              // A hang-up is charged on what was relayed: never more than the hold. A failure before any content: 0.
              const cost = s.end === "failed" ? 0 : s.end === "hangUp" ? Math.floor((s.holdMicros * Math.min(s.costPermille, 1_000)) / 1_000) : Math.floor((s.holdMicros * s.costPermille) / 1_000);
              asked.set(requestId, { cost, hold: s.holdMicros });
              await writers[s.via === 0 ? 1 : 0].execute(account, { type: "chargeChat", requestId, model: "m", promptTokens: 1, completionTokens: 1, costMicros: cost, ...(s.end === "usage" ? {} : { counted: true }) });
              return;
            }
            case "create": {
              const taskId = ++taskIds;
              try {
                await writer.open(openingEvent(account, taskId), s.estimateMicros, `${account}-open-${taskId}`);
              } catch (error) {
                if (error instanceof InsufficientBalanceError) return;
                throw error;
              }
              await sleep(0);
              const cost = Math.floor((s.estimateMicros * s.costPermille) / 1_000);
              const command = s.succeeds ? { type: "settle" as const, taskId, costMicros: cost, totalTokens: 1, model: "m" } : { type: "release" as const, taskId, reason: "failed" };
              await writers[s.via === 0 ? 1 : 0].close(account, command, 0);
              if (s.succeeds) settled += cost;
              return;
            }
          }
        };

        for (const wave of waves) await Promise.all(wave.map(play));
        if (crashed.size > 0) {
          // The crashed edges' holds expire; the account's next write closes them.
          await sleep(CRASH_TTL_MS + 5);
          await writers[0].execute(account, { type: "credit", amountMicros: 1, creditId: `${account}-after` });
          credits += 1;
        }

        const history = await readAccountHistory(app.nats.js, app.nats.jsm, account);
        for (const { event, after } of history) {
          expect(after.balanceMicros, `after ${event.type} v${event.meta.version}`).toBeGreaterThanOrEqual(-after.creditLimitMicros);
        }
        const now = await writers[0].current(account);
        expect(now.reservedMicros).toBe(0);
        const charges = history.map((entry) => entry.event).filter((event) => event.type === "ChatUsageCharged");
        const lapses = history.map((entry) => entry.event).filter((event) => event.type === "ChatReservationLapsed");
        expect(charges.map((charge) => charge.data.requestId).sort()).toEqual([...asked.keys()].sort());
        expect(lapses.map((lapse) => lapse.data.requestId).sort()).toEqual([...crashed].sort());
        let uncollected = 0;
        let askedTotal = 0;
        for (const charge of charges) {
          const request = asked.get(charge.data.requestId);
          if (!request) throw new Error(`a charge nobody asked for: ${charge.data.requestId}`);
          expect(charge.data.costMicros + (charge.data.uncollectedMicros ?? 0)).toBe(request.cost);
          // What the account could not pay is the house's only when the answer cost more than its hold.
          if (charge.data.uncollectedMicros) expect(request.cost).toBeGreaterThan(request.hold);
          uncollected += charge.data.uncollectedMicros ?? 0;
          askedTotal += request.cost;
        }
        expect(now.balanceMicros).toBe(credits - askedTotal + uncollected - settled);
      }),
      { numRuns: 25, interruptAfterTimeLimit: 20_000 },
    );
  }, 60_000);
});
