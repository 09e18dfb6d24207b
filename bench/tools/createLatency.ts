/**
 * Where a create's latency goes at a fixed offered rate with many tasks already live:
 * `node --import tsx bench/tools/createLatency.ts [live-tasks] [rate] [seconds] [instant]` (defaults 10000, 1000, 4;
 * `instant`: the instant suite's upstream, whose tasks end at their first poll, with a fourth part, acceptance → success).
 * Starts nats-server and `reelay serve` with the video suite's config and 20 accounts, makes `live-tasks`
 * parked tasks first (64 at a time, as the suite's saturated phases leave them), waits 3 s, then offers creates
 * of the parked model on a fixed schedule (`openLoop.ts`) and splits each create's time with its task's events:
 * due → opening (edge: auth, id, reservation), → acceptance (runner), → answer (edge's feed and reply).
 * `BENCH_NODE_ARGS=--trace-gc` puts V8's GC lines in reelay's log (kept with BENCH_KEEP_WORKDIR=1). Issue 31's p99.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { TASK_LOG_SUBJECTS } from "../../contracts/videoTask.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { taskMessageBody } from "../../services/shared/taskLog.ts";
import { prepareAccounts } from "../lib/benchAccounts.ts";
import { runOpenLoop } from "../lib/openLoop.ts";
import { startReelay } from "../lib/reelayChild.ts";
import { createConcurrently, videoCreator } from "../lib/taskLoad.ts";
import { benchConfig } from "../suites/videoPath.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";

const liveTasks = Number(process.argv[2] ?? 10_000);
const rate = Number(process.argv[3] ?? 1000);
const seconds = Number(process.argv[4] ?? 4);
/** The live tasks park on one provider, the measured creates on another (a provider holds 10,000 at most). */
const LIVE_MODEL = "Bench-parked";
const MODEL = "Bench-parked-offered";
const instant = process.argv[5] === "instant" ? await instantVideoUpstream({ pollEveryMs: 10, maxInFlight: 5000 }) : undefined;
const request = instant
  ? { model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4, generate_audio: false }
  : { model: MODEL, prompt: "a fox", duration: 4 };

const workDir = mkdtempSync(join(tmpdir(), "reelay-latency-"));
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = instant?.config ?? benchConfig();
const keys = await prepareAccounts(nats.url, config, 20, "tenant");
const reelay = await startReelay({ natsUrl: nats.url, config, workDir, ...(instant ? { env: instant.env } : {}) });
const nc = await connect({ servers: nats.url });
const jsm = await jetstreamManager(nc);
try {
  const seeding = performance.now();
  await createConcurrently(liveTasks, 64, videoCreator(reelay.baseUrl, keys, instant ? request : { model: LIVE_MODEL, prompt: "a fox", duration: 4 }));
  console.log(`${liveTasks} live tasks made in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const from = (await jsm.streams.info("EVENTS")).state.last_seq + 1;
  const recordTo = join(workDir, "records.tsv");
  const run = await runOpenLoop("latency", {
    url: `${reelay.baseUrl}/api/compat/videosGenerations`,
    method: "POST",
    headers: { "content-type": "application/json" },
    authorizations: keys.map((key) => `Bearer ${key}`),
    body: JSON.stringify(request),
    rate,
    seconds,
    marker: "provider_task_id",
    connections: 256,
    cpu: "1",
    warmPath: "/healthz",
    recordTo,
  });
  const rssMb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${reelay.proc.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
  console.log(`reelay's resident memory after the run: ${rssMb.toFixed(0)} MB`);
  console.log(`offered ${rate}/s: ${run.ok} ok, ${run.errors} errors, p50 ${run.p50Ms.toFixed(1)} p99 ${run.p99Ms.toFixed(1)} max ${run.maxMs.toFixed(1)} ms`);

  const last = (await jsm.streams.info("EVENTS")).state.last_seq;
  const consumer = await jetstream(nc).consumers.get("EVENTS", { filter_subjects: [...TASK_LOG_SUBJECTS], deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from });
  const at = new Map<number, { opened?: number; accepted?: number; ended?: number }>();
  for await (const msg of await consumer.consume()) {
    const event = taskMessageBody(msg.json()) as { type: string; meta: { taskId: number; at: string } };
    const entry = at.get(event.meta.taskId) ?? {};
    if (event.type === "TaskSubmitted") entry.opened = Date.parse(event.meta.at);
    if (event.type === "UpstreamAccepted") entry.accepted = Date.parse(event.meta.at);
    if (event.type === "GenerationSucceeded" || event.type === "GenerationFailed") entry.ended = Date.parse(event.meta.at);
    at.set(event.meta.taskId, entry);
    if (msg.seq >= last) break;
  }
  const rows = readFileSync(recordTo, "utf8").trim().split("\n").map((line) => {
    const [due, latency, body] = line.split("\t");
    const id = (JSON.parse(body ?? "{}") as { data?: { task_id?: number } }).data?.task_id ?? 0;
    const times = at.get(id) ?? {};
    const dueMs = Number(due);
    const opened = times.opened ?? NaN;
    const accepted = times.accepted ?? NaN;
    return { due: dueMs, latency: Number(latency), edge: opened - dueMs, runner: accepted - opened, answer: dueMs + Number(latency) - accepted, toSuccess: (times.ended ?? NaN) - accepted };
  });
  const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * p)]?.toFixed(1);
  for (const part of instant ? (["edge", "runner", "answer", "toSuccess"] as const) : (["edge", "runner", "answer"] as const)) {
    console.log(`${part.padEnd(6)} p50 ${percentile(rows.map((r) => r[part]), 0.5)} p99 ${percentile(rows.map((r) => r[part]), 0.99)} ms`);
  }
  const start = Math.min(...rows.map((r) => r.due));
  console.log("slowest 12 (due offset ms: total = edge + runner + answer):");
  for (const r of [...rows].sort((a, b) => b.latency - a.latency).slice(0, 12)) {
    console.log(`${(r.due - start).toFixed(0).padStart(5)}: ${r.latency.toFixed(1)} = ${r.edge.toFixed(1)} + ${r.runner.toFixed(1)} + ${r.answer.toFixed(1)}`);
  }
  console.log(`reelay's log: ${reelay.logFile}`);
} finally {
  await nc.close();
  await reelay.proc.stop(5000);
  await nats.stop();
  await instant?.upstream.stop();
  if (process.env.BENCH_KEEP_WORKDIR !== "1") rmSync(workDir, { recursive: true, force: true });
}
