/**
 * Issue 3 benchmark: how fast `audit replay` rebuilds balances from the ledger (the money subjects of stream
 * EVENTS), as a ratio of how fast the same messages can merely be read by an ordered consumer, both measured in
 * this run on the same server.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeliverPolicy } from "@nats-io/jetstream";
import { ledgerSubject, moneyEpochAfter, type LedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { balancesProjection } from "../../services/billing/projections.ts";
import { replayProjection } from "../../services/shared/projectionReplay.ts";
import { connectNats, type Nats } from "../../services/shared/nats.ts";
import type { BenchRow } from "../table.ts";

const ACCOUNTS = 200;
const EVENTS_PER_ACCOUNT = 1_000; // opened, credited, then 499 reserve/settle or reserve/release pairs
const TOTAL = ACCOUNTS * EVENTS_PER_ACCOUNT;

/** A plausible history: every account credited, then tasks reserved and settled (3 in 4) or released. */
function* accountHistory(account: string): Generator<LedgerEvent> {
  const at = new Date().toISOString();
  let version = 0;
  const meta = (cause: string) => ({ schema: 1 as const, account, version: ++version, at, cause });
  yield { type: "AccountOpened", data: {}, meta: meta(`open-${account}`) };
  yield { type: "AccountCredited", data: { amountMicros: 1_000_000_000 }, meta: meta(`credit-${account}`) };
  for (let task = 1; version < EVENTS_PER_ACCOUNT; task++) {
    const taskId = task;
    yield { type: "CostReserved", data: { taskId, amountMicros: 5_009_400 }, meta: meta(`reserve-task-${taskId}`) };
    yield task % 4 === 0
      ? { type: "ReservationReleased", data: { taskId, reservedMicros: 5_009_400, reason: "failed" }, meta: meta(`release-task-${taskId}`) }
      : {
          type: "ReservationSettled",
          data: { taskId, reservedMicros: 5_009_400, costMicros: 5_009_400, totalTokens: 108_900, model: "VideoModel-2.0" },
          meta: meta(`settle-task-${taskId}`),
        };
  }
}

async function fillLedger(nats: Nats): Promise<void> {
  const histories = Array.from({ length: ACCOUNTS }, (_, i) => accountHistory(`acct-${i}`));
  const reservations: number[] = [];
  // Interleave accounts as live traffic would; publishes from one connection keep their order per subject.
  let pending: Array<Promise<unknown>> = [];
  for (let round = 0; round < EVENTS_PER_ACCOUNT; round++) {
    for (const [i, history] of histories.entries()) {
      const next = history.next();
      if (next.done) continue;
      // The subject's epoch follows the reservations before it, as the ledger writer's would (contracts/ledger.ts).
      const epoch = moneyEpochAfter(reservations[i] ?? 0);
      if (next.value.type === "CostReserved") reservations[i] = (reservations[i] ?? 0) + 1;
      pending.push(nats.js.publish(ledgerSubject(`acct-${i}`, epoch), JSON.stringify(next.value)));
      if (pending.length >= 2_000) {
        await Promise.all(pending);
        pending = [];
      }
    }
  }
  await Promise.all(pending);
}

/**
 * Baseline: read the messages the replay reads (the money subjects, `filter` set) or the whole stream, with an
 * ordered consumer, and do nothing with them. Since a create is one write (issue 31) the money shares stream
 * EVENTS with the tasks' later events, so the replay reads it through a filter, which costs nats-server more per
 * message than the unfiltered read (about 0.6 of its rate here, where every message is money): the replay's own
 * work is measured against the same filtered read.
 */
async function rawRead(nats: Nats, filter: boolean): Promise<number> {
  const { state } = await nats.jsm.streams.info(STREAMS.events.name);
  const consumer = await nats.js.consumers.get(STREAMS.events.name, { deliver_policy: DeliverPolicy.All, ...(filter ? { filter_subjects: [...balancesProjection.subjects] } : {}) });
  let count = 0;
  for await (const msg of await consumer.consume({ max_messages: 2048 })) {
    count += msg.data.length > 0 ? 1 : 0;
    if (msg.seq >= state.last_seq) break;
  }
  await consumer.delete().catch(() => undefined);
  return count;
}

async function timed<T>(work: () => Promise<T>): Promise<{ result: T; seconds: number }> {
  const started = performance.now();
  const result = await work();
  return { result, seconds: (performance.now() - started) / 1000 };
}

export async function ledgerReplayBench(): Promise<BenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), "reelay-bench-ledger-"));
  const server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
  const nats = await connectNats(server.url, "bench-ledger", { replicas: 1, leaseMs: 30_000 });
  try {
    const fill = await timed(() => fillLedger(nats));
    // Alternate the reads and keep each one's best, so a noisy moment hurts none alone.
    let raw = Infinity;
    let whole = Infinity;
    let replay = Infinity;
    for (let round = 0; round < 2; round++) {
      const read = await timed(() => rawRead(nats, true));
      if (read.result !== TOTAL) throw new Error(`raw read saw ${read.result} of ${TOTAL} events`);
      raw = Math.min(raw, read.seconds);
      whole = Math.min(whole, (await timed(() => rawRead(nats, false))).seconds);
      const rebuilt = await timed(() => replayProjection(nats.js, nats.jsm, balancesProjection));
      if (rebuilt.result.events !== TOTAL || rebuilt.result.docs.size !== ACCOUNTS) throw new Error("replay saw a different ledger");
      replay = Math.min(replay, rebuilt.seconds);
    }
    const rawRate = TOTAL / raw;
    const replayRate = TOTAL / replay;
    return [
      { suite: "ledger", metric: `ledger events written (setup, ${ACCOUNTS} accounts)`, value: Math.round(TOTAL / fill.seconds), unit: "events/s" },
      { suite: "ledger", metric: `raw ordered-consumer read of ${TOTAL} events, the whole stream`, value: Math.round(TOTAL / whole), unit: "events/s" },
      { suite: "ledger", metric: `raw ordered-consumer read of ${TOTAL} events, the money subjects`, value: Math.round(rawRate), unit: "events/s" },
      {
        suite: "ledger",
        metric: "replay: rebuild balances from the money subjects (vs reading them)",
        value: Math.round(replayRate),
        unit: "events/s",
        baseline: Math.round(rawRate),
        ratio: replayRate / rawRate,
        target: ">= 0.5",
      },
    ];
  } finally {
    await nats.nc.drain().catch(() => undefined);
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
