/**
 * What an account's history costs each of its creates: `node --import tsx bench/tools/guardGrowth.ts [histories…]`
 * (default 0 2000 20000 100000). nats-server finds the last sequence over a wildcard guard by walking every
 * subject under it, and every task opening is a subject of its own. For each history size this fills a fresh
 * stream with that many openings of one account, then runs three chains of guarded publishes for 1.5 s each:
 * - as before money epochs: a new task subject each time (`acct.A.money.task.N`), guarded over `acct.A.money.>`;
 * - as a reference, guarded by one subject's last sequence;
 * - as reelay writes now (contracts/ledger.ts): openings in epochs of EPOCH_OPENINGS
 *   (`acct.A.money.<epoch>.task.N`, the earlier openings spread over past epochs), each guarded over its epoch
 *   only, the epoch's last opening ending it.
 * Starts its own nats-server (pin it: `taskset -c 0,1`).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { MONEY_EPOCH_OPENINGS } from "../../contracts/ledger.ts";
import { startNatsServer } from "../../infra/natsServer.ts";

const histories = process.argv.length > 2 ? process.argv.slice(2).map(Number) : [0, 2_000, 20_000, 100_000];
const STREAM = "GUARD_GROWTH";
const ROUND_MS = 1_500;
/** The epoch's size (reelay's, unless EPOCH_OPENINGS says otherwise): a guard walks at most this many subjects; a read by task id, one per epoch. */
const EPOCH_OPENINGS = Number(process.env.EPOCH_OPENINGS ?? MONEY_EPOCH_OPENINGS);
/** About an opening's size (bench/lib/benchAccounts.ts openingBytes). */
const payload = new Uint8Array(670);

const workDir = mkdtempSync(join(tmpdir(), "reelay-guard-growth-"));
const server = await startNatsServer({ storeDir: join(workDir, "store"), say: () => {} });
const nc = await connect({ servers: server.url, name: "guard-growth" });
const jsm = await jetstreamManager(nc);
const js = jetstream(nc);

/** Guarded publishes per second of one chain: each expects the sequence the previous one got over `filter`. */
async function chainRate(filter: string, subjectOf: (n: number) => string, startAfter: number): Promise<number> {
  let last = startAfter;
  let n = 0;
  const started = performance.now();
  while (performance.now() - started < ROUND_MS) {
    const ack = await js.publish(subjectOf(n++), payload, { expect: { lastSubjectSequence: last, lastSubjectSequenceSubject: filter } });
    last = ack.seq;
  }
  return n / ((performance.now() - started) / 1000);
}

/** The epoch-shaped chain, after `history` openings in earlier epochs. */
async function epochChainRate(history: number): Promise<number> {
  let epoch = Math.floor(history / EPOCH_OPENINGS) + 1;
  let last = 0;
  let n = 0;
  const started = performance.now();
  while (performance.now() - started < ROUND_MS) {
    const guard = { lastSubjectSequence: last, lastSubjectSequenceSubject: `acct.c.money.${epoch}.>` };
    last = (await js.publish(`acct.c.money.${epoch}.task.${n++}`, payload, { expect: guard })).seq;
    if (n % EPOCH_OPENINGS === 0) {
      epoch += 1;
      last = 0;
    }
  }
  return n / ((performance.now() - started) / 1000);
}

process.stdout.write(`earlier openings  guarded over acct.A.money.> (before epochs)  guarded over one subject  ratio  in epochs of ${EPOCH_OPENINGS} (reelay now)  ratio\n`);
for (const history of histories) {
  await jsm.streams.add({ name: STREAM, subjects: ["acct.>"] });
  const pending: Array<Promise<unknown>> = [];
  for (let task = 0; task < history; task++) {
    pending.push(js.publish(`acct.a.money.task.${task}`, payload));
    pending.push(js.publish(`acct.c.money.${Math.floor(task / EPOCH_OPENINGS)}.task.${task}`, payload));
    if (pending.length >= 2_000) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  const lastOfA = history > 0 ? ((await jsm.streams.getMessage(STREAM, { last_by_subj: `acct.a.money.task.${history - 1}` }))?.seq ?? 0) : 0;
  const wildcard = await chainRate("acct.a.money.>", (n) => `acct.a.money.task.${history + n}`, lastOfA);
  const single = await chainRate("acct.b.money.ledger", () => "acct.b.money.ledger", 0);
  const epochs = await epochChainRate(history);
  process.stdout.write(
    `${String(history).padStart(16)}  ${wildcard.toFixed(0).padStart(35)}/s  ${single.toFixed(0).padStart(22)}/s  ${(wildcard / single).toFixed(2)}  ${epochs.toFixed(0).padStart(26)}/s  ${(epochs / single).toFixed(2)}\n`,
  );
  await jsm.streams.delete(STREAM);
}
await nc.close();
await server.stop();
rmSync(workDir, { recursive: true, force: true });
