/**
 * How much of the runner's heap a task waiting for its next poll keeps alive:
 * `node --import tsx bench/tools/waitingTaskHeap.ts [tasks]` (default 5000). Starts nats-server, an edge and
 * projector, and a runner process of its own on one core (so the runner is its main thread, which Node's
 * `--heapsnapshot-signal` snapshots), with the video suite's config. It parks 200 tasks on the parked model
 * (their first poll is 10 minutes away), snapshots the runner's heap, parks `tasks` more, snapshots again, and
 * prints the live heap of each snapshot and the difference per task. A snapshot collects garbage first, so
 * the difference is what the waiting tasks keep. For issue 7's create p99: every live task is copied by the
 * young-generation collector once and marked by every full collection, so its size sets the runner's pauses.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer } from "../../infra/natsServer.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { createConcurrently, videoCreator } from "../lib/taskLoad.ts";
import { benchConfig } from "../suites/videoPath.ts";

const tasks = Number(process.argv[2] ?? 5000);
const WARM_UP_TASKS = 200;
const SETTLE_MS = 3_000;

const workDir = mkdtempSync(join(tmpdir(), "reelay-waiting-heap-"));
const snapshotDir = join(workDir, "snapshots");
mkdirSync(snapshotDir);
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = benchConfig();
const key = await prepareAccount(nats.url, workDir, config);
const front = await startReelay({ natsUrl: nats.url, config, workDir, services: ["edge", "projector"], cpu: "0" });
// One core: `reelay serve` then runs the runner on its main thread (no service threads).
const runner = await startReelay({
  natsUrl: nats.url,
  config,
  workDir,
  services: ["runner"],
  cpu: "1",
  env: { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${snapshotDir}` },
});
const create = videoCreator(front.baseUrl, [key], { model: "Bench-parked", prompt: "a fox", duration: 4 });

/** Signals the runner, waits until its snapshot is written, and sums the snapshot's nodes (bytes). */
async function liveHeap(): Promise<number> {
  const before = new Set(readdirSync(snapshotDir));
  process.kill(runner.proc.pid, "SIGUSR2");
  for (let lastSize = -1, waited = 0; ; waited++) {
    if (waited > 60) throw new Error(`the runner wrote no heap snapshot to ${snapshotDir} within a minute`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const file = readdirSync(snapshotDir).find((name) => !before.has(name));
    if (file === undefined) continue;
    const size = statSync(join(snapshotDir, file)).size;
    if (size > 0 && size === lastSize) return snapshotBytes(join(snapshotDir, file));
    lastSize = size;
  }
}

function snapshotBytes(path: string): number {
  const snapshot = JSON.parse(readFileSync(path, "utf8")) as { snapshot: { meta: { node_fields: string[] } }; nodes: number[] };
  const fields = snapshot.snapshot.meta.node_fields;
  const selfSize = fields.indexOf("self_size");
  let total = 0;
  for (let i = selfSize; i < snapshot.nodes.length; i += fields.length) total += snapshot.nodes[i] ?? 0;
  rmSync(path);
  return total;
}

await createConcurrently(WARM_UP_TASKS, 64, create);
await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
const warm = await liveHeap();
await createConcurrently(tasks, 64, create);
await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
const parked = await liveHeap();
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
process.stdout.write(`runner live heap: ${mb(warm)} MB with ${WARM_UP_TASKS} waiting tasks, ${mb(parked)} MB with ${WARM_UP_TASKS + tasks}\n`);
process.stdout.write(`per waiting task: ${((parked - warm) / tasks / 1024).toFixed(2)} KB\n`);
await Promise.all([runner.proc.stop(5_000), front.proc.stop(5_000)]);
await nats.stop();
rmSync(workDir, { recursive: true, force: true });
