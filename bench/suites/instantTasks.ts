import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as natsConnect } from "@nats-io/transport-node";
import { startNatsServer } from "../../infra/natsServer.ts";
import { varz, varzDelta } from "../lib/natsStats.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { createConcurrently, videoCreator, watchFinals } from "../lib/taskLoad.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "instant";
const TASKS = 1000;
const IN_FLIGHT = 64;

const suiteStart = performance.now();
const say = (line: string) => process.stderr.write(`[${SUITE} +${((performance.now() - suiteStart) / 1000).toFixed(1)}s] ${line}\n`);

/**
 * Issue 7's "create→success with an instant provider": TASKS creates, IN_FLIGHT at a time, against
 * `reelay serve` (both cores, unpinned) whose model runs on a fake OpenAI-compatible video upstream that
 * finishes at the first status call (test/fakes/openAiVideosUpstream.ts; each result is still copied into
 * the object store). Timed from the first create to the last success event in the task log, which this
 * process reads with its own ordered consumer. Also NATS messages per task over the whole life cycle.
 */
export async function instantTasksBench(): Promise<BenchRow[]> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-bench-instant-"));
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say });
    stops.push(() => nats.stop());
    const { upstream, config, env } = await instantVideoUpstream({ pollEveryMs: 10, maxInFlight: 5000 });
    stops.push(() => upstream.stop());
    const key = await prepareAccount(nats.url, workDir, config);
    const reelay = await startReelay({ natsUrl: nats.url, config, workDir, env });
    stops.push(() => reelay.proc.stop(15_000));

    const nc = await natsConnect({ servers: nats.url });
    stops.push(() => nc.close());
    const finals = await watchFinals(nc);
    const create = videoCreator(reelay.baseUrl, key, { model: "VideoModel-2.0-mini", prompt: "instant bench", duration: 4, generate_audio: false });
    say(`${TASKS} creates, ${IN_FLIGHT} in flight`);
    const before = await varz(nats.url);
    const started = performance.now();
    await createConcurrently(TASKS, IN_FLIGHT, create);
    const createdAt = performance.now();
    const deadline = Date.now() + 120_000;
    while (finals.succeeded + finals.failed < TASKS && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    // Let the reactors (views, index, webhooks, settlement) finish before counting messages.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const msgs = varzDelta(before, await varz(nats.url));
    finals.stop();
    if (finals.failed > 0 || finals.succeeded < TASKS) throw new Error(`${finals.succeeded} of ${TASKS} tasks succeeded, ${finals.failed} failed`);
    const seconds = (finals.lastFinal - started) / 1000;
    return [
      { suite: SUITE, metric: `create→success, instant provider (${TASKS} tasks, ${IN_FLIGHT} in flight, 2 cores)`, value: TASKS / seconds, unit: "tasks/s", target: ">= 1000" },
      { suite: SUITE, metric: "creates accepted in the same run", value: TASKS / ((createdAt - started) / 1000), unit: "tasks/s" },
      { suite: SUITE, metric: "NATS msgs per task, whole life (in+out at the server)", value: (msgs.in_msgs + msgs.out_msgs) / TASKS, unit: "msgs", target: "<= 12" },
    ];
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
}
