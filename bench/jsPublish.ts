/**
 * The baseline for the create benchmark: raw JetStream async publishes of ~300 B messages from one client
 * process, with a bounded window of unacknowledged publishes, into a file-backed stream of its own.
 * `node --import tsx bench/jsPublish.ts <nats-url> <seconds> <max-messages>`; prints `RESULT {json}`.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

const [url, secondsArg, maxArg] = process.argv.slice(2);
if (!url) {
  process.stderr.write("usage: jsPublish.ts <nats-url> [seconds] [max-messages]\n");
  process.exit(2);
}
const seconds = Number(secondsArg ?? 3);
const maxMessages = Number(maxArg ?? 200_000);
const WINDOW = 256;
const STREAM = "BENCH_PUBLISH";
const SUBJECT = "bench.publish";
const payload = new TextEncoder().encode(JSON.stringify({ type: "SubmitVideoTask", pad: "x".repeat(240) }).padEnd(300, " "));

const nc = await connect({ servers: url, name: "bench-js-publish" });
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: STREAM, subjects: [SUBJECT] });
const js = jetstream(nc);

/** Publishes with at most WINDOW acks outstanding until `limit` messages or `ms` elapse. */
function publishFor(ms: number, limit: number): Promise<{ acked: number; elapsedMs: number }> {
  const started = performance.now();
  const deadline = started + ms;
  let sent = 0;
  let acked = 0;
  let inflight = 0;
  return new Promise((resolve, reject) => {
    const pump = () => {
      while (inflight < WINDOW && sent < limit && performance.now() < deadline) {
        sent++;
        inflight++;
        js.publish(SUBJECT, payload).then(() => {
          inflight--;
          acked++;
          pump();
        }, reject);
      }
      if (inflight === 0) resolve({ acked, elapsedMs: performance.now() - started });
    };
    pump();
  });
}

await publishFor(500, 20_000); // warm-up: JIT and the stream's first file block
const { acked, elapsedMs } = await publishFor(seconds * 1000, maxMessages);
await jsm.streams.delete(STREAM);
await nc.drain();
process.stdout.write(`RESULT ${JSON.stringify({ acked, seconds: elapsedMs / 1000, msgsPerS: acked / (elapsedMs / 1000), bytes: payload.length })}\n`);
