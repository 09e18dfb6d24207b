/**
 * The baseline for the create benchmark since a create is one guarded write: raw JetStream publishes of
 * `bytes`-sized messages, each guarded by the last sequence over its account's subjects
 * (`expect.lastSubjectSequenceSubject` over its money epoch, as a task's opening is), one chain per account (an account's next
 * write needs its last one's sequence), `accounts` chains at once, from one client process.
 * `node --import tsx bench/jsGuardedPublish.ts <nats-url> <seconds> <accounts> <bytes>`; prints `RESULT {json}`.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { OpeningChain } from "./lib/openingChain.ts";

const [url, secondsArg, accountsArg, bytesArg] = process.argv.slice(2);
if (!url) {
  process.stderr.write("usage: jsGuardedPublish.ts <nats-url> [seconds] [accounts] [bytes]\n");
  process.exit(2);
}
const seconds = Number(secondsArg ?? 3);
const accounts = Number(accountsArg ?? 20);
const bytes = Number(bytesArg ?? 1000);
const STREAM = "BENCH_GUARDED";
const payload = new TextEncoder().encode(JSON.stringify({ pad: "x".repeat(Math.max(0, bytes - 12)) }));

const nc = await connect({ servers: url, name: "bench-js-guarded-publish" });
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: STREAM, subjects: ["benchacct.>"] });
const js = jetstream(nc);
const chains = Array.from({ length: accounts }, (_, account) => new OpeningChain(js, `benchacct.${account}`));
let next = 0;

/** One account's chain: each publish guarded by the sequence the previous one got, until `deadline`. */
async function chain(account: number, deadline: number): Promise<number> {
  const openings = chains[account] as OpeningChain;
  let written = 0;
  while (performance.now() < deadline) {
    await openings.publish(next++, payload);
    written++;
  }
  return written;
}

async function run(ms: number): Promise<{ written: number; elapsedMs: number }> {
  const started = performance.now();
  const counts = await Promise.all(Array.from({ length: accounts }, (_, account) => chain(account, started + ms)));
  return { written: counts.reduce((a, b) => a + b, 0), elapsedMs: performance.now() - started };
}

await run(500); // warm-up: JIT and the stream's first file block
const { written, elapsedMs } = await run(seconds * 1000);
await jsm.streams.delete(STREAM);
await nc.drain();
process.stdout.write(`RESULT ${JSON.stringify({ written, seconds: elapsedMs / 1000, msgsPerS: written / (elapsedMs / 1000), bytes: payload.length, accounts })}\n`);
