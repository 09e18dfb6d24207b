import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { connect as natsConnect, type NatsConnection } from "@nats-io/transport-node";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { varz, varzDelta } from "../lib/natsStats.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { startReelay } from "../lib/reelayChild.ts";
import { prepareAccounts } from "../lib/benchAccounts.ts";
import { createConcurrently, videoCreator, watchFinals, type FinalsWatch } from "../lib/taskLoad.ts";
import { measureCpu, programPid, spawnTsx, waitForOutput } from "../lib/procs.ts";
import { FLOOR_STATE_EVENTS, FLOOR_STREAM, floorKeys } from "../lib/floorNames.ts";
import { INSTANT_UPSTREAM_KEY_ENV } from "../../test/helpers/instantUpstream.ts";
import type { OpenAiVideosUpstream } from "../../test/fakes/openAiVideosUpstream.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "instant";
/** The first tasks after start: the JIT is still compiling the hot paths (a third of the CPU then). */
const COLD_TASKS = 2000;
/** Then measured: a running gateway's steady state, in WINDOWS windows of WARM_TASKS tasks each, one after the other. */
const WARM_TASKS = 3000;
/**
 * The first window is still slower than the next (about 1,080 tasks/s against 1,260–1,330 on 2026-11-26:
 * after 2,000 tasks the gateway has not settled yet), and a window lasts under 3 s, so a second of another
 * tenant's load on this shared machine moves its rate by a tenth: the target row is the median window's,
 * and the slowest is reported beside it.
 */
const WINDOWS = 3;
/** The tasks every per-task figure of a phase is divided by: its warm windows'. */
const MEASURED_TASKS = WINDOWS * WARM_TASKS;
/** Tenants the creates come from, in turn. */
const ACCOUNTS = 20;
const IN_FLIGHT = 64;

const suiteStart = performance.now();
const say = (line: string) => process.stderr.write(`[${SUITE} +${((performance.now() - suiteStart) / 1000).toFixed(1)}s] ${line}\n`);

/** Until the task-log reactors (settlement among them) have nothing left to handle (every final task charged or released). */
async function settled(jsm: JetStreamManager, deadline: number): Promise<number> {
  for (;;) {
    const info = await jsm.consumers.info(STREAMS.events.name, CONSUMERS.taskLogReactors);
    if (info.num_pending + info.num_ack_pending === 0) return performance.now();
    if (Date.now() > deadline) throw new Error(`settlement still ${info.num_pending + info.num_ack_pending} events behind`);
    await pause(20);
  }
}

const rateOf = (count: number, from: number, to: number) => count / ((to - from) / 1000);

/** One warm window's rates: to success, and creates accepted (tasks/s). */
interface WindowRate {
  success: number;
  accepted: number;
}

/**
 * CPU per task of the measured windows (µs, from /proc): the gateway's process (reelay's, or the floor's), its
 * nats-server, and this process (the load and the fake upstream, alike in both phases). Beside each other they
 * say where reelay's cost above the floor is: its own threads, or the server and the load.
 */
interface CpuPerTask {
  gateway: number;
  nats: number;
  bench: number;
}

async function windowsWithCpu(gatewayPid: number, natsPid: number, windows: () => Promise<WindowRate[]>) {
  const { result, cpuUs } = await measureCpu([gatewayPid, natsPid, process.pid], windows);
  const [gateway = 0, nats = 0, bench = 0] = cpuUs.map((us) => us / MEASURED_TASKS);
  return { windows: result, cpu: { gateway, nats, bench } satisfies CpuPerTask };
}

/**
 * Counts nats-server's in+out messages from now on: all of them, and less this process's own connection's (its
 * watch of the task log, its consumer-info polls), which are not the measured system's.
 */
async function messagesFromNow(natsUrl: string, nc: NatsConnection): Promise<() => Promise<{ all: number; measured: number }>> {
  const before = await varz(natsUrl);
  const benchBefore = nc.stats();
  return async () => {
    const msgs = varzDelta(before, await varz(natsUrl));
    const benchAfter = nc.stats();
    const all = msgs.in_msgs + msgs.out_msgs;
    return { all, measured: all - (benchAfter.inMsgs - benchBefore.inMsgs + (benchAfter.outMsgs - benchBefore.outMsgs)) };
  };
}

/** Rates of the WINDOWS warm windows of WARM_TASKS creates each, one after the other: to success, and creates accepted. */
async function warmWindows(create: () => Promise<void>, finals: FinalsWatch, what: string): Promise<WindowRate[]> {
  const windows: WindowRate[] = [];
  for (let window = 1; window <= WINDOWS; window++) {
    say(`${what}: warm window ${window} of ${WINDOWS}: ${WARM_TASKS} creates, ${IN_FLIGHT} in flight`);
    const warm = await phase(WARM_TASKS, create, finals);
    windows.push({ success: rateOf(WARM_TASKS, warm.started, warm.lastFinal), accepted: rateOf(WARM_TASKS, warm.started, warm.createdAt) });
    say(`${what}: window ${window}: ${windows.at(-1)?.success.toFixed(0)} tasks/s to success`);
  }
  return windows;
}

const medianOf = (windows: readonly WindowRate[]): WindowRate => [...windows].sort((a, b) => a.success - b.success)[Math.floor(windows.length / 2)] ?? { success: 0, accepted: 0 };

/**
 * The instant task's floor on the same upstream and server, after reelay has stopped: bench/createFloor.ts
 * `--instant` makes the design's messages and upstream calls of a task's life with the least code, loaded as
 * reelay was (cold tasks first, then the same windows). What reelay spends above it is its own work.
 */
async function floorPhase(natsUrl: string, natsPid: number, upstream: OpenAiVideosUpstream, upstreamKey: string, reelay: { rate: number; cpu: CpuPerTask }): Promise<BenchRow[]> {
  const floor = spawnTsx("instant floor", "bench/createFloor.ts", [natsUrl, String(ACCOUNTS), "--instant", upstream.baseUrl, upstreamKey], { profiled: true });
  const nc = await natsConnect({ servers: natsUrl });
  try {
    const port = (await waitForOutput(floor, /PORT (\d+)/, 15_000))[1];
    const finals = await watchFinals(nc, { stream: FLOOR_STREAM, subjects: FLOOR_STATE_EVENTS });
    const create = videoCreator(`http://127.0.0.1:${port}`, floorKeys(ACCOUNTS), { model: "VideoModel-2.0-mini", prompt: "instant bench", duration: 4 });
    say(`instant floor: ${COLD_TASKS} cold creates`);
    await phase(COLD_TASKS, create, finals);
    const messages = await messagesFromNow(natsUrl, nc);
    const { windows, cpu } = await windowsWithCpu(floor.pid, natsPid, () => warmWindows(create, finals, "instant floor"));
    const median = medianOf(windows);
    await pause(1000);
    const msgs = await messages();
    finals.stop();
    return [
      { suite: SUITE, metric: "instant task floor: the design's messages and upstream calls, no reelay work (bench/createFloor.ts --instant)", value: median.success, unit: "tasks/s" },
      { suite: SUITE, metric: "  its NATS msgs per task (in+out, less the bench's watch)", value: msgs.measured / MEASURED_TASKS, unit: "msgs" },
      { suite: SUITE, metric: "create→success (vs the instant task floor)", value: reelay.rate, unit: "tasks/s", baseline: median.success, ratio: reelay.rate / median.success },
      { suite: SUITE, metric: "CPU per task, reelay's process (vs the floor's process)", value: reelay.cpu.gateway, unit: "µs", baseline: cpu.gateway, ratio: reelay.cpu.gateway / cpu.gateway },
      { suite: SUITE, metric: "CPU per task, nats-server (vs under the floor)", value: reelay.cpu.nats, unit: "µs", baseline: cpu.nats, ratio: reelay.cpu.nats / cpu.nats },
      { suite: SUITE, metric: "CPU per task, the load and the fake upstream (vs under the floor)", value: reelay.cpu.bench, unit: "µs", baseline: cpu.bench, ratio: reelay.cpu.bench / cpu.bench },
    ];
  } finally {
    await nc.close();
    await floor.stop(5000);
  }
}

/** `count` creates, then until each has a final event; seconds from the first create to the last final. */
async function phase(count: number, create: () => Promise<void>, finals: FinalsWatch): Promise<{ started: number; createdAt: number; lastFinal: number }> {
  finals.succeeded = 0;
  finals.failed = 0;
  const started = performance.now();
  await createConcurrently(count, IN_FLIGHT, create);
  const createdAt = performance.now();
  const deadline = Date.now() + 120_000;
  while (finals.succeeded + finals.failed < count && Date.now() < deadline) await pause(20);
  if (finals.failed > 0 || finals.succeeded < count) throw new Error(`${finals.succeeded} of ${count} tasks succeeded, ${finals.failed} failed`);
  return { started, createdAt, lastFinal: finals.lastFinal };
}

/**
 * Issue 7's "create→success with an instant provider": creates, IN_FLIGHT at a time, against `reelay serve`
 * (both cores, unpinned) whose model runs on a fake OpenAI-compatible video upstream that finishes at the first
 * status call (test/fakes/openAiVideosUpstream.ts; each result is still copied into the object store). Timed
 * from the first create to the last success event in the task log, which this process reads with its own
 * ordered consumer. First COLD_TASKS right after start (reported, not the target), then WINDOWS windows of
 * WARM_TASKS measured: each window's rate (the median is the target row), the time until settlement has
 * charged every one of them, and NATS messages per task over the whole life cycle (creates, runs, read
 * models, settlement, webhooks).
 */
export async function instantTasksBench(): Promise<BenchRow[]> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-bench-instant-"));
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say });
    stops.push(() => nats.stop());
    const { upstream, config, env } = await instantVideoUpstream({ pollEveryMs: 10, maxInFlight: 5000 });
    stops.push(() => upstream.stop());
    const keys = await prepareAccounts(nats.url, config, ACCOUNTS, "tenant");
    const reelay = await startReelay({ natsUrl: nats.url, config, workDir, env });
    stops.push(() => reelay.proc.stop(15_000));

    const nc = await natsConnect({ servers: nats.url });
    stops.push(() => nc.close());
    const jsm = await jetstreamManager(nc);
    const finals = await watchFinals(nc);
    stops.push(async () => finals.stop());
    const create = videoCreator(reelay.baseUrl, keys, { model: "VideoModel-2.0-mini", prompt: "instant bench", duration: 4, generate_audio: false });

    say(`cold: ${COLD_TASKS} creates right after start, ${IN_FLIGHT} in flight`);
    const cold = await phase(COLD_TASKS, create, finals);
    await settled(jsm, Date.now() + 120_000);
    await pause(1000);

    const warmStarted = performance.now();
    const messages = await messagesFromNow(nats.url, nc);
    const natsPid = programPid(nats.pid, "nats-server");
    const { windows, cpu } = await windowsWithCpu(reelay.proc.pid, natsPid, () => warmWindows(create, finals, "reelay"));
    const settledAt = await settled(jsm, Date.now() + 120_000);
    // Let the other reactors (views, index, webhooks) finish too before counting messages.
    await pause(2000);
    const msgs = await messages();
    const bySuccess = [...windows].sort((a, b) => a.success - b.success);
    const median = medianOf(windows);
    // The floor runs alone on the 2 cores: reelay (and this process's watch of its log) stop first.
    await reelay.proc.stop(15_000);
    finals.stop();
    const floorRows = await floorPhase(nats.url, natsPid, upstream, env[INSTANT_UPSTREAM_KEY_ENV] ?? "", { rate: median.success, cpu });
    return [
      { suite: SUITE, metric: `create→success, instant provider, warm (median of ${WINDOWS} windows of ${WARM_TASKS} tasks, ${IN_FLIGHT} in flight, 2 cores)`, value: median.success, unit: "tasks/s", target: ">= 2000" },
      { suite: SUITE, metric: "  the slowest window", value: bySuccess[0]?.success ?? 0, unit: "tasks/s" },
      { suite: SUITE, metric: "creates accepted in the median window", value: median.accepted, unit: "tasks/s" },
      { suite: SUITE, metric: `create→settled (each task charged), all ${WINDOWS} windows`, value: rateOf(MEASURED_TASKS, warmStarted, settledAt), unit: "tasks/s" },
      { suite: SUITE, metric: "NATS msgs per task, whole life (in+out at the server)", value: msgs.all / MEASURED_TASKS, unit: "msgs" },
      // Issue 7's "<= 12 messages per task" is read on the create path (the video suite), where its "31" was measured.
      { suite: SUITE, metric: "  of which reelay's own (less the bench's watch of the log)", value: msgs.measured / MEASURED_TASKS, unit: "msgs" },
      { suite: SUITE, metric: `create→success right after start (first ${COLD_TASKS} tasks)`, value: rateOf(COLD_TASKS, cold.started, cold.lastFinal), unit: "tasks/s" },
      ...floorRows,
    ];
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
}
