/**
 * Where a create's latency goes at a fixed offered rate: `node --import tsx bench/tools/createLatency.ts [rates]`
 * (default `1000,1000,1000`: runs of 3 s each, the first one cold). Starts nats-server and `reelay serve` with
 * the video suite's config, offers creates of the parked model on a fixed schedule (`openLoop.ts`), and for
 * the last run splits each create's time with its task's events: due → `TaskSubmitted` (edge: auth, id,
 * reservation), → `UpstreamAccepted` (runner), → answer (edge's feed and reply); plus the round trip of a
 * side publisher every 5 ms, to tell a nats-server stall from one in reelay. For issue 7's p99 target.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startNatsServer } from "../../infra/natsServer.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { benchConfig } from "../suites/videoPath.ts";
import { runOpenLoop } from "../lib/openLoop.ts";

const workDir = mkdtempSync(join(tmpdir(), "reelay-latency-"));
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = benchConfig();
const key = await prepareAccount(nats.url, workDir, config);
const reelay = await startReelay({ natsUrl: nats.url, config, workDir });
const recordTo = join(workDir, "records.tsv");
const side = await connect({ servers: nats.url });
const sideJs = jetstream(side);
const rtts: Array<[number, number]> = [];
let sideOn = true;
void (async () => {
  while (sideOn) {
    const t = performance.now();
    await sideJs.publish("task-ids").catch(() => undefined);
    rtts.push([performance.timeOrigin + t, performance.now() - t]);
    await new Promise((r) => setTimeout(r, 5));
  }
})();
const rates = (process.argv[2] ?? "1000,1000,1000").split(",").map(Number);
for (const [index, rate] of rates.entries()) {
  const r = await runOpenLoop("latency", {
    url: `${reelay.baseUrl}/api/compat/videosGenerations`,
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "Bench-parked", prompt: "a fox", duration: 4 }),
    rate,
    seconds: 3,
    marker: "provider_task_id",
    connections: 256,
    cpu: "1",
    warmPath: "/healthz",
    ...(index === rates.length - 1 ? { recordTo } : {}),
  });
  console.log(`offered ${rate}/s:`, `p50 ${r.p50Ms.toFixed(1)} p99 ${r.p99Ms.toFixed(1)}`);
}
sideOn = false;
const nc = await connect({ servers: nats.url });
const consumer = await jetstream(nc).consumers.get("TASKS", {});
const last = (await (await jetstreamManager(nc)).streams.info("TASKS")).state.last_seq;
const at = new Map<number, { submitted?: number; accepted?: number }>();
for await (const m of await consumer.consume()) {
  const e = m.json<{ type: string; meta: { taskId: number; at: string } }>();
  const entry = at.get(e.meta.taskId) ?? {};
  if (e.type === "TaskSubmitted") entry.submitted = Date.parse(e.meta.at);
  if (e.type === "UpstreamAccepted") entry.accepted = Date.parse(e.meta.at);
  at.set(e.meta.taskId, entry);
  if (m.seq >= last) break;
}
const rows = readFileSync(recordTo, "utf8").split("\n").map((line) => {
  const [due, latency, body] = line.split("\t");
  const id = (JSON.parse(body ?? "{}") as { data?: { task_id?: number } }).data?.task_id ?? 0;
  const t = at.get(id) ?? {};
  const dueMs = Number(due);
  return { latency: Number(latency), before: (t.submitted ?? NaN) - dueMs, runner: (t.accepted ?? NaN) - (t.submitted ?? NaN), after: dueMs + Number(latency) - (t.accepted ?? NaN), due: dueMs };
});
rows.sort((a, b) => b.latency - a.latency);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)]?.toFixed(1);
console.log("edge before (due→TaskSubmitted) p50/p99", pct(rows.map((r) => r.before), 0.5), pct(rows.map((r) => r.before), 0.99));
console.log("runner (TaskSubmitted→UpstreamAccepted) p50/p99", pct(rows.map((r) => r.runner), 0.5), pct(rows.map((r) => r.runner), 0.99));
console.log("edge after (accepted→answer) p50/p99", pct(rows.map((r) => r.after), 0.5), pct(rows.map((r) => r.after), 0.99));
const t0 = Math.min(...rows.map((r) => r.due));
console.log("slowest 10 (due offset ms, total, before, runner, after):");
for (const r of rows.slice(0, 10)) console.log((r.due - t0).toFixed(0), r.latency.toFixed(1), r.before.toFixed(1), r.runner.toFixed(1), r.after.toFixed(1));
const window = rtts.filter(([at]) => at >= t0 && at <= t0 + 3500);
window.sort((a, b) => b[1] - a[1]);
console.log("side publish rtt during the run: p50", [...window].sort((a, b) => a[1] - b[1])[Math.floor(window.length / 2)]?.[1].toFixed(2), "slowest:", window.slice(0, 6).map(([at, rtt]) => `${(at - t0).toFixed(0)}:${rtt.toFixed(1)}`).join(" "));
await nc.close();
await reelay.proc.stop(5000);
await nats.stop();
