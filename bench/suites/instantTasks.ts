import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeliverPolicy, jetstream } from "@nats-io/jetstream";
import { connect as natsConnect } from "@nats-io/transport-node";
import { TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { statusChangeOf } from "../../services/tasks/statusChanges.ts";
import { varz, varzDelta } from "../lib/natsStats.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
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
    const consumer = await jetstream(nc).consumers.get(STREAMS.tasks.name, { filter_subjects: STREAMS.tasks.subjects[0], deliver_policy: DeliverPolicy.New });
    const feed = await consumer.consume();
    let succeeded = 0;
    let failed = 0;
    let lastFinal = 0;
    void (async () => {
      for await (const msg of feed) {
        const event = TaskEvent.safeParse(msg.json());
        const status = event.success ? statusChangeOf(event.data) : undefined;
        if (status === "success") succeeded++;
        if (status === "failed") failed++;
        if (status === "success" || status === "failed") lastFinal = performance.now();
      }
    })();

    const body = JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "instant bench", duration: 4, generate_audio: false });
    const create = async () => {
      const response = await fetch(`${reelay.baseUrl}/api/compat/videosGenerations`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
      await response.text();
      if (response.status !== 200) throw new Error(`create answered ${response.status}`);
    };
    say(`${TASKS} creates, ${IN_FLIGHT} in flight`);
    const before = await varz(nats.url);
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < TASKS) {
          next++;
          await create();
        }
      }),
    );
    const createdAt = performance.now();
    const deadline = Date.now() + 120_000;
    while (succeeded + failed < TASKS && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    // Let the reactors (views, index, webhooks, settlement) finish before counting messages.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const msgs = varzDelta(before, await varz(nats.url));
    feed.stop();
    if (failed > 0 || succeeded < TASKS) throw new Error(`${succeeded} of ${TASKS} tasks succeeded, ${failed} failed`);
    const seconds = (lastFinal - started) / 1000;
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
