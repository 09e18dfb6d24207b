import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountBalance, MONEY_EPOCH_OPENINGS, type LedgerEvent } from "../contracts/ledger.ts";
import type { TaskOpening } from "../contracts/taskOpening.ts";
import { taskOpeningSubject } from "../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { availableMicros, InsufficientBalanceError, type LedgerCommand } from "../services/billing/account.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { readAccountHistory, type LedgerEntry } from "../services/billing/ledgerReader.ts";
import { balancesProjection } from "../services/billing/projections.ts";
import { auditProjection, type ProjectionDifference } from "../services/shared/projectionAudit.ts";
import { AccountBusyError } from "../services/shared/errors.ts";
import { openingEvent, openTask } from "./helpers/openTask.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * The audit property of design.md, against a real nats-server and the real projector: random
 * interleavings of credits, creates (a task's opening, which reserves), creates tried again after a lost
 * answer (the same opening again, or with an Idempotency-Key a new task id under the same key), successes
 * (settle), failures (release), redeliveries and restarts, spread over two AccountLedger instances as two
 * processes would be, some of them concurrent.
 */

type Via = 0 | 1;
type Step = { via: Via; withPrevious: boolean } & (
  | { kind: "credit"; account: number; amountMicros: number }
  /**
   * A create. `retry`: its answer was lost and it is tried again from the other process, at once (racing the
   * first try) or after it: the same opening ("same"), or a new task id under the same Idempotency-Key ("keyed").
   */
  | { kind: "create"; account: number; estimateMicros: number; retry: { as: "same" | "keyed"; racing: boolean } | undefined }
  /** Success; `duplicateVia` fires the same settle from the other process at once (a redelivery racing the first). */
  | { kind: "succeed"; pick: number; costPermille: number; duplicateVia: Via | undefined }
  | { kind: "fail"; pick: number; duplicateVia: Via | undefined }
  /** Success on one process racing a failure (timeout) on the other: exactly one of them may land. */
  | { kind: "race"; pick: number; costPermille: number }
  /** A late redelivery of a task that has already finished. */
  | { kind: "redeliver"; pick: number; as: "settle" | "release"; costPermille: number }
  | { kind: "restart" }
);

const via = fc.constantFrom<Via>(0, 1);
const common = { via, withPrevious: fc.boolean() };
const pick = fc.nat({ max: 1000 });
const permille = fc.oneof(fc.constant(1000), fc.integer({ min: 0, max: 1000 }));
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ ...common, kind: fc.constant("credit" as const), account: fc.nat({ max: 2 }), amountMicros: fc.integer({ min: 1, max: 4_000_000 }) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      ...common,
      kind: fc.constant("create" as const),
      account: fc.nat({ max: 2 }),
      estimateMicros: fc.integer({ min: 1, max: 3_000_000 }),
      retry: fc.option(fc.record({ as: fc.constantFrom("same" as const, "keyed" as const), racing: fc.boolean() }), { nil: undefined }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ ...common, kind: fc.constant("succeed" as const), pick, costPermille: permille, duplicateVia: fc.option(via, { nil: undefined }) }) },
  { weight: 2, arbitrary: fc.record({ ...common, kind: fc.constant("fail" as const), pick, duplicateVia: fc.option(via, { nil: undefined }) }) },
  { weight: 1, arbitrary: fc.record({ ...common, kind: fc.constant("race" as const), pick, costPermille: permille }) },
  { weight: 2, arbitrary: fc.record({ ...common, kind: fc.constant("redeliver" as const), pick, as: fc.constantFrom("settle" as const, "release" as const), costPermille: permille }) },
  { weight: 1, arbitrary: fc.record({ ...common, kind: fc.constant("restart" as const) }) },
);
const scenario = fc.record({
  /** What each account starts with (0 included: then its first creates are refused). */
  opening: fc.array(fc.integer({ min: 0, max: 10_000_000 }), { minLength: 2, maxLength: 3 }),
  steps: fc.array(step, { minLength: 1, maxLength: 40, size: "max" }),
});

/** Up to 4 consecutive steps marked `withPrevious` run concurrently. */
function batches(steps: Step[]): Step[][] {
  const out: Step[][] = [];
  for (const s of steps) {
    const last = out.at(-1);
    if (s.withPrevious && last && last.length < 4) last.push(s);
    else out.push([s]);
  }
  return out;
}

interface TaskModel {
  id: number;
  account: string;
  estimate: number;
  state: "reserved" | "settled" | "released";
  cost: number;
}

interface AccountModel {
  name: string;
  credits: number;
  tasks: TaskModel[];
  refused: number[];
}

const settledCost = (a: AccountModel) => a.tasks.reduce((sum, t) => sum + (t.state === "settled" ? t.cost : 0), 0);
const modelReserved = (a: AccountModel) => a.tasks.reduce((sum, t) => sum + (t.state === "reserved" ? t.estimate : 0), 0);
const modelAvailable = (a: AccountModel) => a.credits - settledCost(a) - modelReserved(a);
const costOf = (task: TaskModel, costPermille: number) => Math.floor((task.estimate * costPermille) / 1000);
type CloseCommand = Extract<LedgerCommand, { type: "settle" | "release" }>;
const settle = (task: TaskModel, costMicros: number): CloseCommand => ({ type: "settle", taskId: task.id, costMicros, totalTokens: costMicros, model: "VideoModel-2.0" });
const release = (task: TaskModel): CloseCommand => ({ type: "release", taskId: task.id, reason: "generation failed" });

async function projectorCaughtUp(app: TestApp): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (const durable of [CONSUMERS.taskLogReactors]) {
    for (;;) {
      const info = await app.nats.jsm.consumers.info(STREAMS.events.name, durable);
      if (info.num_pending === 0 && info.num_ack_pending === 0) break;
      if (Date.now() > deadline) throw new Error(`${durable} still behind: ${info.num_pending} pending, ${info.num_ack_pending} unacked`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

const ofTask = (event: LedgerEvent, taskId: number) => "taskId" in event.data && event.data.taskId === taskId;

describe("ledger properties (real NATS, projector running)", () => {
  let app: TestApp;
  let ledgers: [AccountLedger, AccountLedger];
  let nextTaskId = 1;
  let nextCreditId = 1;
  let runs = 0;
  /** Runs in which the seeded account's money went past its first epoch's end. */
  let crossed = 0;
  const newLedger = () => new AccountLedger(app.nats);

  beforeAll(async () => {
    app = await startTestApp({ services: ["projector"] });
    // The second lingers on closes as settlement's does (SETTLEMENT_LINGER_MS, shorter here): its creates go ahead
    // of closes it holds, in every interleaving the property makes.
    ledgers = [newLedger(), new AccountLedger(app.nats, { closeLingerMs: 20 })];
  });
  afterAll(async () => app?.stop());

  /**
   * Writes `count` openings of nothing (0 µ¥ reserved) straight to the account's first epoch, as earlier
   * creates would have, without either process's ledger knowing; the model holds them as open tasks.
   */
  async function seedOpenings(account: AccountModel, count: number): Promise<void> {
    const at = new Date().toISOString();
    let version = account.credits > 0 ? 2 : 1;
    const writes: Array<Promise<unknown>> = [];
    for (let n = 0; n < count; n++) {
      const id = nextTaskId++;
      const opening: TaskOpening = {
        task: openingEvent(account.name, id),
        money: { type: "CostReserved", data: { taskId: id, amountMicros: 0 }, meta: { schema: 1, account: account.name, version: ++version, at, cause: `reserve-task-${id}` } },
      };
      writes.push(app.nats.js.publish(taskOpeningSubject(account.name, id, 0), JSON.stringify(opening)));
      account.tasks.push({ id, account: account.name, estimate: 0, state: "reserved", cost: 0 });
    }
    await Promise.all(writes);
  }

  /** Runs one batch of steps concurrently and folds their outcomes into the model. */
  async function runBatch(batch: Step[], accounts: AccountModel[]): Promise<void> {
    const claimed = new Set<number>();
    const startAvailable = new Map(accounts.map((a) => [a.name, modelAvailable(a)]));
    const reservesInBatch = new Map<string, number>();
    const open = () => accounts.flatMap((a) => a.tasks).filter((t) => t.state === "reserved" && !claimed.has(t.id));
    const finished = () => accounts.flatMap((a) => a.tasks).filter((t) => t.state !== "reserved" && !claimed.has(t.id));
    const claim = (from: TaskModel[], index: number): TaskModel | undefined => {
      const task = from.length > 0 ? from[index % from.length] : undefined;
      if (task) claimed.add(task.id);
      return task;
    };
    const account = (index: number) => accounts[index % accounts.length] as AccountModel;
    const run = (v: Via, name: string, command: Exclude<LedgerCommand, { type: "reserve" }>) => ledgers[v].execute(name, command);
    const effects: Array<() => Promise<() => Promise<void>>> = [];

    for (const s of batch) {
      switch (s.kind) {
        case "credit": {
          const a = account(s.account);
          effects.push(async () => {
            await run(s.via, a.name, { type: "credit", amountMicros: s.amountMicros, creditId: `${a.name}-${nextCreditId++}` });
            return async () => {
              a.credits += s.amountMicros;
            };
          });
          break;
        }
        case "create": {
          const a = account(s.account);
          const id = nextTaskId++;
          reservesInBatch.set(a.name, (reservesInBatch.get(a.name) ?? 0) + s.estimateMicros);
          const msgID = `${a.name}-create-${id}`;
          const tryOpen = (v: Via, taskId: number) =>
            ledgers[v].open(openingEvent(a.name, taskId), s.estimateMicros, msgID).then(
              (outcome) => outcome,
              (error: unknown) => {
                if (error instanceof InsufficientBalanceError) return "refused" as const;
                throw error;
              },
            );
          const retry = s.retry;
          // A keyed retry is a new request: it takes a new task id, and only the key (the msgID) is the same.
          const retryId = retry?.as === "keyed" ? nextTaskId++ : id;
          effects.push(async () => {
            const other: Via = s.via === 0 ? 1 : 0;
            const first = tryOpen(s.via, id);
            const [outcome, again] = retry?.racing ? await Promise.all([first, tryOpen(other, retryId)]) : [await first, retry ? await tryOpen(other, retryId) : undefined];
            const accepted = outcome !== "refused" || (again !== undefined && again !== "refused");
            return async () => {
              // One task per create however it was tried: the retry never made a second one (nor reserved twice).
              const history = await readAccountHistory(app.nats.js, app.nats.jsm, a.name);
              const opened = history.filter((e) => e.event.type === "CostReserved" && (ofTask(e.event, id) || ofTask(e.event, retryId)));
              expect(opened.length, `create ${id} (retry ${JSON.stringify(retry)}) opened ${opened.length} tasks`).toBe(accepted ? 1 : 0);
              if (retry?.as === "keyed" && opened.length === 1) {
                // Whichever try landed, the other was told where (a duplicate) or that it was there.
                const first = opened[0]?.event;
                const loser = first?.type === "CostReserved" && first.data.taskId === id ? again : outcome;
                if (loser !== undefined && loser !== "refused") expect(loser).toMatchObject({ written: false });
              }
              const othersInBatch = (reservesInBatch.get(a.name) ?? 0) - s.estimateMicros;
              const worstCase = (startAvailable.get(a.name) ?? 0) - othersInBatch;
              // Nothing running beside it can lower available below `worstCase`, so this much must be accepted.
              if (worstCase >= s.estimateMicros) expect(accepted, `task ${id} of ${a.name} refused with ${worstCase} available at worst`).toBe(true);
              if (batch.length === 1) expect(accepted, `task ${id}: available ${worstCase}, estimate ${s.estimateMicros}`).toBe(worstCase >= s.estimateMicros);
              const landed = opened[0]?.event;
              const taskId = landed?.type === "CostReserved" ? landed.data.taskId : id;
              if (accepted) a.tasks.push({ id: taskId, account: a.name, estimate: s.estimateMicros, state: "reserved", cost: 0 });
              else a.refused.push(id);
              if (retryId !== taskId) a.refused.push(retryId);
            };
          });
          break;
        }
        case "succeed":
        case "fail": {
          const task = claim(open(), s.pick);
          if (!task) break;
          const command = s.kind === "succeed" ? settle(task, costOf(task, s.costPermille)) : release(task);
          const duplicate = s.duplicateVia;
          effects.push(async () => {
            await Promise.all([run(s.via, task.account, command), ...(duplicate === undefined ? [] : [run(duplicate, task.account, command)])]);
            return async () => {
              task.state = command.type === "settle" ? "settled" : "released";
              task.cost = command.type === "settle" ? command.costMicros : 0;
            };
          });
          break;
        }
        case "race": {
          const task = claim(open(), s.pick);
          if (!task) break;
          const cost = costOf(task, s.costPermille);
          effects.push(async () => {
            await Promise.all([run(s.via, task.account, settle(task, cost)), run(s.via === 0 ? 1 : 0, task.account, release(task))]);
            return async () => {
              const history = await readAccountHistory(app.nats.js, app.nats.jsm, task.account);
              const ends = history.filter((e) => ofTask(e.event, task.id) && e.event.type !== "CostReserved");
              expect(ends, `task ${task.id} ended ${ends.length} times`).toHaveLength(1);
              task.state = ends[0]?.event.type === "ReservationSettled" ? "settled" : "released";
              task.cost = task.state === "settled" ? cost : 0;
            };
          });
          break;
        }
        case "redeliver": {
          const task = claim(finished(), s.pick);
          if (!task) break;
          const command = s.as === "settle" ? settle(task, costOf(task, s.costPermille)) : release(task);
          effects.push(async () => {
            await run(s.via, task.account, command);
            return async () => {};
          });
          break;
        }
        case "restart":
          effects.push(async () => {
            ledgers[s.via].forget();
            return async () => {};
          });
          break;
      }
    }
    const outcomes = await Promise.all(effects.map((effect) => effect()));
    for (const apply of outcomes) await apply();
  }

  async function checkInvariants(accounts: AccountModel[]): Promise<void> {
    for (const a of accounts) {
      const history: LedgerEntry[] = await readAccountHistory(app.nats.js, app.nats.jsm, a.name);
      // (a) no accepted movement ever left the account with a negative available balance.
      for (const { event, after } of history) {
        expect(availableMicros(after), `${a.name} after v${event.meta.version} ${event.type}`).toBeGreaterThanOrEqual(0);
        expect(after.reservedMicros).toBeGreaterThanOrEqual(0);
      }
      const now = history.at(-1)?.after;
      expect(now).toBeDefined();
      if (!now) return;
      // (b) each task reserved once, ended at most once, exactly as the model says.
      for (const task of a.tasks) {
        const events = history.filter((e) => ofTask(e.event, task.id)).map((e) => e.event);
        const ends = events.filter((e) => e.type !== "CostReserved");
        expect(events[0]?.type).toBe("CostReserved");
        expect(events.filter((e) => e.type === "CostReserved")).toHaveLength(1);
        expect(ends.length, `task ${task.id} ended ${ends.length} times`).toBe(task.state === "reserved" ? 0 : 1);
        const end = ends[0];
        if (task.state === "settled") expect(end?.type === "ReservationSettled" && end.data.costMicros).toBe(task.cost);
        if (task.state === "released") expect(end?.type).toBe("ReservationReleased");
      }
      for (const id of a.refused) expect(history.some((e) => ofTask(e.event, id)), `refused task ${id} left a trace`).toBe(false);
      const chargedInLedger = history.reduce((sum, e) => sum + (e.event.type === "ReservationSettled" ? e.event.data.costMicros : 0), 0);
      expect(chargedInLedger).toBe(settledCost(a));
      expect(now.balanceMicros).toBe(a.credits - settledCost(a));
      expect(now.reservedMicros).toBe(modelReserved(a));
      expect([...now.reservations.keys()].map(String).sort()).toEqual(a.tasks.filter((t) => t.state === "reserved").map((t) => String(t.id)).sort());
      // Both "processes" agree with the log, whatever they had folded before.
      for (const ledger of ledgers) {
        const current = await ledger.current(a.name);
        expect([current.balanceMicros, current.reservedMicros, current.version]).toEqual([now.balanceMicros, now.reservedMicros, now.version]);
      }
    }

    // (c) the live balances equal a replay of the log, and the model.
    await projectorCaughtUp(app);
    const ours = (d: ProjectionDifference) => accounts.some((a) => a.name === d.key);
    const balances = await auditProjection(app.nats, balancesProjection, app.nats.balances);
    expect(balances.differences.filter(ours), "balances differ from their replay").toEqual([]);
    for (const a of accounts) {
      const live = AccountBalance.parse((await app.nats.balances.get(a.name))?.json());
      expect([live.balanceMicros, live.reservedMicros]).toEqual([a.credits - settledCost(a), modelReserved(a)]);
    }
  }

  it("random interleavings over two processes: never overspends, charges each task once, replays to the live balances", async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ opening, steps }) => {
        runs += 1;
        const accounts: AccountModel[] = opening.map((credits, i) => ({ name: `run${runs}-acct${i}`, credits, tasks: [], refused: [] }));
        for (const [i, a] of accounts.entries()) {
          const ledger = ledgers[(i % 2) as Via];
          await ledger.execute(a.name, { type: "open" });
          if (a.credits > 0) await ledger.execute(a.name, { type: "credit", amountMicros: a.credits, creditId: `${a.name}-opening` });
        }
        // The first account with money starts one or two openings short of its first money epoch's end
        // (contracts/ledger.ts), so the steps' creates and closes cross it, from both processes, on folds the
        // seeds made stale.
        const crossing = accounts.find((a) => a.credits > 0);
        if (crossing) await seedOpenings(crossing, MONEY_EPOCH_OPENINGS - 1 - (runs % 2));
        for (const batch of batches(steps)) await runBatch(batch, accounts);
        await checkInvariants(accounts);
        if (crossing && (await ledgers[0].current(crossing.name)).epoch > 0) crossed += 1;
      }),
      // No time limit on the runs: a loaded machine (two suites at once) got through 14 of 15 in a 40 s limit, and
      // the test failed on that count. The bound is the test's timeout, well above the 22 s the 15 runs take alone.
      { numRuns: 15 },
    );
    expect(runs).toBe(15);
    expect(crossed, "runs whose seeded account crossed an epoch's end").toBeGreaterThan(0);
  }, 180_000);

  it("a cost above the estimate is charged as far as the credit limit allows; the rest is recorded uncollected, the house's loss (issue 32)", async () => {
    const [edge, settler] = ledgers;
    const name = "over-estimate";
    const [first, second] = [nextTaskId++, nextTaskId++];
    await edge.execute(name, { type: "credit", amountMicros: 5_000_000, creditId: "over-1" });
    await openTask(edge, name, first, { amountMicros: 5_000_000 });
    const after = await settler.execute(name, { type: "settle", taskId: first, costMicros: 6_000_000, totalTokens: 130_435, model: "VideoModel-2.0" });
    // Credit limit 0: the account pays what it had, never goes below zero.
    expect(after).toMatchObject({ balanceMicros: 0, reservedMicros: 0 });
    await expect(openTask(edge, name, nextTaskId++, { amountMicros: 1 })).rejects.toThrow("insufficient balance: this task needs 0.000001 yuan, available 0.000000");
    // With a credit limit, the account may owe up to it, and no further.
    await edge.execute(name, { type: "setCreditLimit", limitMicros: 500_000, changeId: "over-limit" });
    await edge.execute(name, { type: "credit", amountMicros: 1_000_000, creditId: "over-2" });
    await openTask(edge, name, second, { amountMicros: 1_000_000 });
    const owed = await settler.execute(name, { type: "settle", taskId: second, costMicros: 2_000_000, totalTokens: 43_478, model: "VideoModel-2.0" });
    expect(owed).toMatchObject({ balanceMicros: -500_000, reservedMicros: 0 });
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, name);
    const settlements = history.flatMap(({ event }) => (event.type === "ReservationSettled" ? [[event.data.costMicros, event.data.uncollectedMicros]] : []));
    expect(settlements).toEqual([
      [5_000_000, 1_000_000],
      [1_500_000, 500_000],
    ]);
  });

  it("a process whose fold is stale still sees another process's credit before refusing a reserve", async () => {
    const [edge, cli] = ledgers;
    const name = "topped-up";
    await edge.execute(name, { type: "open" }); // the edge has folded the account: balance 0
    await cli.execute(name, { type: "credit", amountMicros: 3_000_000, creditId: "topup-1" });
    const id = nextTaskId++;
    await openTask(edge, name, id, { amountMicros: 2_000_000 });
    expect((await edge.current(name)).reservations).toEqual(new Map([[id, 2_000_000]]));
  });

  it("a process whose fold predates a reservation still settles it (and still releases it)", async () => {
    const [edge, settler] = ledgers;
    const name = "stale-settler";
    await settler.execute(name, { type: "credit", amountMicros: 9_000_000, creditId: "stale-1" }); // settler folds the account now
    const [first, second] = [nextTaskId++, nextTaskId++];
    await openTask(edge, name, first, { amountMicros: 2_000_000 });
    await openTask(edge, name, second, { amountMicros: 2_000_000 });
    await settler.execute(name, { type: "settle", taskId: first, costMicros: 1_500_000, totalTokens: 1, model: "m" });
    const after = await settler.execute(name, { type: "release", taskId: second, reason: "generation failed" });
    expect(after).toMatchObject({ balanceMicros: 7_500_000, reservedMicros: 0, reservations: new Map() });
  });

  it("a command retried from another process (same cause) lands once and the retry succeeds", async () => {
    const first = new AccountLedger(app.nats);
    const retry = new AccountLedger(app.nats);
    const credit: Exclude<LedgerCommand, { type: "reserve" }> = { type: "credit", amountMicros: 7_000_000, creditId: "retried-credit" };
    await first.execute("retried", { type: "open" });
    await first.execute("retried", credit);
    const after = await retry.execute("retried", credit);
    expect(after.balanceMicros).toBe(7_000_000);
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "retried");
    expect(history.filter((entry) => entry.event.type === "AccountCredited")).toHaveLength(1);
  });

  it("a cold start resumes from the writer's snapshot and reaches the same state as a full read", async () => {
    const writer = newLedger();
    await writer.execute("snapshotted", { type: "open" });
    await writer.execute("snapshotted", { type: "credit", amountMicros: 1_000_000_000, creditId: "snap-credit" });
    for (let task = 1; task <= 300; task++) {
      await openTask(writer, "snapshotted", 900_000 + task, { amountMicros: 1_000 });
      if (task % 3 !== 0) await writer.execute("snapshotted", { type: "settle", taskId: 900_000 + task, costMicros: 900, totalTokens: 1, model: "m" });
    }
    const live = await writer.current("snapshotted");
    await expect.poll(async () => (await app.nats.ledgerSnapshots.get("snapshotted"))?.json<{ version: number }>().version).toBe(500);
    const cold = await newLedger().current("snapshotted");
    expect({ ...cold, reservations: [...cold.reservations] }).toEqual({ ...live, reservations: [...live.reservations] });
    expect(cold.reservations.size).toBe(100);
  });

  it("a create that keeps losing its account's races past its time answers 503 (try again), not 500, and writes nothing", async () => {
    const name = "contended";
    const [other] = ledgers;
    const impatient = new AccountLedger(app.nats, { lostRacesForMs: 0 });
    await other.execute(name, { type: "credit", amountMicros: 10_000, creditId: "contended-1" });
    await openTask(impatient, name, nextTaskId++, { amountMicros: 1_000 });
    // Another writer moves the account on: the impatient ledger's next create, decided on its own fold, loses its guard.
    await other.execute(name, { type: "credit", amountMicros: 10_000, creditId: "contended-2" });
    const lost = nextTaskId++;
    const refusal = await openTask(impatient, name, lost, { amountMicros: 1_000 }).then(() => undefined, (error: unknown) => error);
    // Surely not written (unlike a write NATS did not answer): the create answers so, at once.
    expect(refusal).toBeInstanceOf(AccountBusyError);
    expect((refusal as AccountBusyError).status).toBe(503);
    expect((refusal as AccountBusyError).retryAfterSeconds).toBe(1);
    expect((refusal as Error).message).toMatch(/busy with other writes: try again/);
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, name);
    expect(history.filter((entry) => entry.event.type === "CostReserved").map((entry) => (entry.event.data as { taskId: number }).taskId)).not.toContain(lost);
  });

  it("200 creates at once from two processes on money for 150 open exactly 150 tasks; their settlements are written in groups", async () => {
    const name = "grouped";
    const [a, b] = ledgers;
    await a.execute(name, { type: "credit", amountMicros: 150_000, creditId: "grouped-1" });
    const ids = Array.from({ length: 200 }, () => nextTaskId++);
    const outcomes = await Promise.allSettled(ids.map((taskId, index) => openTask(index % 2 === 0 ? a : b, name, taskId, { amountMicros: 1_000 })));
    const reservedIds = ids.filter((_, index) => outcomes[index]?.status === "fulfilled");
    expect(reservedIds).toHaveLength(150);
    for (const outcome of outcomes) if (outcome.status === "rejected") expect(outcome.reason).toBeInstanceOf(InsufficientBalanceError);
    await Promise.all(reservedIds.map((taskId, index) => (index % 2 === 0 ? b : a).execute(name, { type: "settle", taskId, costMicros: 900, totalTokens: 1, model: "m" })));
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, name);
    const settlementMessages = new Set(history.filter((entry) => entry.event.type === "ReservationSettled").map((entry) => entry.sequence));
    expect(history.filter((entry) => entry.event.type === "CostReserved")).toHaveLength(150);
    expect(history.filter((entry) => entry.event.type === "ReservationSettled")).toHaveLength(150);
    expect(settlementMessages.size, "one message per settlement: nothing was grouped").toBeLessThan(150);
    expect(history.map((entry) => entry.event.meta.version)).toEqual(history.map((_, index) => index + 1));
    expect(history.at(-1)?.after).toMatchObject({ balanceMicros: 150_000 - 150 * 900, reservedMicros: 0 });
    await projectorCaughtUp(app);
    expect(AccountBalance.parse((await app.nats.balances.get(name))?.json())).toMatchObject({ balanceMicros: 15_000, reservedMicros: 0, version: history.length });
  });

  it("the whole ledger replays to exactly the live balances", async () => {
    await projectorCaughtUp(app);
    expect((await auditProjection(app.nats, balancesProjection, app.nats.balances)).differences).toEqual([]);
  });
});
