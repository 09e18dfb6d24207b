import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startBenchNats } from "../lib/benchNats.ts";
import { loadConfig } from "../../services/shared/config.ts";
import { cpuMicros, pinProcess, pinningAvailable, spawnTsx, waitForOutput } from "../lib/procs.ts";
import { logTail, prepareAccount, startReelay, type ReelayChild } from "../lib/reelayChild.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "chat";
/** Gateway and fake upstream share CPU 0; this process (the SSE load generator) moves to CPU 1. */
const SERVER_CPU = "0";
const LOAD_CPU = "1";
const UPSTREAM_KEY = "sk-bench-upstream";
/**
 * Two kinds of stream from the one fake. Throughput: STREAM_WORDS chunks back to back, as fast as the fake
 * can write. Time to first chunk: a short stream paced like a model emitting tokens, because a fake that
 * bursts its whole stream at once would hold the core the gateway shares with it and delay the gateway's
 * first forward by the length of the burst — a cost of the bench's layout, not of relaying.
 */
const BURST = "bench-burst";
const PACED = "bench-paced";
/** Words per throughput stream: the fake sends one chunk per word (plus role, finish and usage chunks). */
const STREAM_WORDS = 100;
const TTFC_SAMPLES = 400;
const CONCURRENT_STREAMS = 200;
const THROUGHPUT_ROUNDS = 2;
const THROUGHPUT_SECONDS = 4;
const IDLE_SECONDS = 2;

const suiteStart = performance.now();
const say = (line: string) => process.stderr.write(`[${SUITE} +${((performance.now() - suiteStart) / 1000).toFixed(1)}s] ${line}\n`);

interface Target {
  name: string;
  host: string;
  port: number;
  path: string;
  headers: Record<string, string>;
  body: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENT_STREAMS + 8 });
const NEWLINE = 0x0a;

/** One streamed request: resolves with time to the first body byte and the number of SSE events. */
function stream(target: Target): Promise<{ ttfcMs: number; events: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request({ host: target.host, port: target.port, path: target.path, method: "POST", agent, headers: target.headers }, (res: IncomingMessage) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new Error(`${target.name} answered ${res.statusCode}`));
      }
      let ttfcMs = -1;
      let events = 0;
      let lastByte = 0;
      res.on("data", (chunk: Buffer) => {
        if (ttfcMs < 0) ttfcMs = performance.now() - started;
        // Count blank lines ("\n\n"), including one split across two reads.
        if (lastByte === NEWLINE && chunk[0] === NEWLINE) events++;
        for (let at = chunk.indexOf("\n\n"); at >= 0; at = chunk.indexOf("\n\n", at + 2)) events++;
        lastByte = chunk[chunk.length - 1] ?? 0;
      });
      res.once("end", () => resolve({ ttfcMs, events }));
      res.once("error", reject);
    });
    req.once("error", reject);
    req.end(target.body);
  });
}

const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;

/** Time to first chunk, one stream at a time, alternating targets so drift hits both equally. */
async function ttfcPhase(targets: readonly Target[]): Promise<Map<string, number[]>> {
  const samples = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  for (let i = 0; i < TTFC_SAMPLES; i++) {
    for (const target of i % 2 === 0 ? targets : [...targets].reverse()) samples.get(target.name)?.push((await stream(target)).ttfcMs);
  }
  for (const list of samples.values()) list.sort((a, b) => a - b);
  return samples;
}

interface Throughput {
  events: number;
  streams: number;
  seconds: number;
  gatewayCpuUs: number;
  upstreamCpuUs: number;
  peakRssMiB: number;
}

const rssMiB = (pid: number): number => {
  const line = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return line ? Number(line[1]) / 1024 : Number.NaN;
};

/** CONCURRENT_STREAMS streams kept open for `seconds` (a new one starts as one ends); events/s over the run. */
async function throughputPhase(target: Target, gatewayPid: number, upstreamPid: number, seconds: number): Promise<Throughput> {
  const deadline = performance.now() + seconds * 1000;
  let events = 0;
  let streams = 0;
  let peakRssMiB = 0;
  const sampler = setInterval(() => (peakRssMiB = Math.max(peakRssMiB, rssMiB(gatewayPid))), 250);
  const gatewayBefore = cpuMicros(gatewayPid);
  const upstreamBefore = cpuMicros(upstreamPid);
  const started = performance.now();
  const worker = async () => {
    while (performance.now() < deadline) {
      const result = await stream(target);
      events += result.events;
      streams++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENT_STREAMS }, worker));
  clearInterval(sampler);
  return {
    events,
    streams,
    seconds: (performance.now() - started) / 1000,
    gatewayCpuUs: cpuMicros(gatewayPid) - gatewayBefore,
    upstreamCpuUs: cpuMicros(upstreamPid) - upstreamBefore,
    peakRssMiB,
  };
}

const sum = (runs: readonly Throughput[]): Throughput =>
  runs.reduce(
    (t, r) => ({
      events: t.events + r.events,
      streams: t.streams + r.streams,
      seconds: t.seconds + r.seconds,
      gatewayCpuUs: t.gatewayCpuUs + r.gatewayCpuUs,
      upstreamCpuUs: t.upstreamCpuUs + r.upstreamCpuUs,
      peakRssMiB: Math.max(t.peakRssMiB, r.peakRssMiB),
    }),
    { events: 0, streams: 0, seconds: 0, gatewayCpuUs: 0, upstreamCpuUs: 0, peakRssMiB: 0 },
  );

/**
 * Streaming chat through reelay vs the same fake upstream called directly, in one run: added
 * time-to-first-chunk, relayed chunks/s at 200 concurrent streams, and the gateway's CPU per request.
 */
export async function chatRelayBench(): Promise<BenchRow[]> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-bench-chat-"));
  const stops: Array<() => Promise<void>> = [];
  let reelay: ReelayChild | undefined;
  const ownCpus = pinningAvailable ? readFileSync("/proc/self/status", "utf8").match(/^Cpus_allowed_list:\s*(\S+)/m)?.[1] : undefined;
  try {
    if (!pinningAvailable) say("taskset not found: processes run unpinned, ratios are less meaningful");
    const nats = await startBenchNats(workDir, say);
    stops.push(() => nats.stop());
    const natsPid = nats.pid;
    // NATS is infrastructure the gateway reaches over the network, like the projector below: it runs on the
    // load core, so CPU 0 holds exactly what the stack notes compare — gateway and upstream.
    pinProcess(natsPid, LOAD_CPU);

    const byModel = { [BURST]: { content: "tok ".repeat(STREAM_WORDS).trim(), chunkDelayMs: 0 }, [PACED]: { content: "one two three", chunkDelayMs: 2 } };
    const fake = spawnTsx("fake upstream", "test/fakes/openaiUpstreamMain.ts", [JSON.stringify({ byModel })], { cpu: SERVER_CPU, env: { FAKE_UPSTREAM_KEY: UPSTREAM_KEY } });
    stops.push(() => fake.stop(2000));
    const fakePort = Number((await waitForOutput(fake, /PORT (\d+)/, 15_000))[1]);

    const config = loadConfig();
    process.env.REELAY_BENCH_UPSTREAM_KEY = UPSTREAM_KEY;
    for (const model of [BURST, PACED]) {
      config.chatModels[model] = {
        provider: "openai-compatible",
        baseUrl: `http://127.0.0.1:${fakePort}/v1`,
        apiKeyEnv: "REELAY_BENCH_UPSTREAM_KEY",
        upstreamModel: model,
        inputPricePerMillionTokens: 1,
        outputPricePerMillionTokens: 2,
        timeoutMs: 30_000,
        maxCompletionTokens: 4096,
      };
    }
    const key = await prepareAccount(nats.url, workDir, config);
    // The gateway under test is the edge; the projector (which keeps the balances the edge's spend check
    // reads) runs in its own process on the load generator's core, as it would on another machine.
    say("starting reelay serve projector, then reelay serve edge");
    const projector = await startReelay({ natsUrl: nats.url, config, workDir, cpu: LOAD_CPU, services: ["projector"] });
    stops.push(() => projector.proc.stop(10_000));
    reelay = await startReelay({ natsUrl: nats.url, config, workDir, cpu: SERVER_CPU, services: ["edge"] });
    const child = reelay;
    stops.push(() => child.proc.stop(10_000));
    // A second edge with REELAY_METRICS=off: what per-request metrics cost a relayed stream (issue 10's 3%).
    const unmeasured = await startReelay({ natsUrl: nats.url, config, workDir, cpu: SERVER_CPU, services: ["edge"], env: { REELAY_METRICS: "off" } });
    stops.push(() => unmeasured.proc.stop(10_000));
    if (pinningAvailable) pinProcess(process.pid, LOAD_CPU);

    const messages = [{ role: "user", content: "benchmark" }];
    // Both ask for usage, so both receive the same events and the upstream does the same work.
    const body = (model: string) => JSON.stringify({ model, messages, stream: true, stream_options: { include_usage: true } });
    const reelayPort = Number(new URL(reelay.baseUrl).port);
    const direct = (model: string): Target => ({
      name: "direct",
      host: "127.0.0.1",
      port: fakePort,
      path: "/v1/chat/completions",
      headers: { authorization: `Bearer ${UPSTREAM_KEY}`, "content-type": "application/json" },
      body: body(model),
    });
    const via = (model: string): Target => ({
      name: "reelay",
      host: "127.0.0.1",
      port: reelayPort,
      path: "/api/compat/chat/completions",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: body(model),
    });
    const targets = [direct(BURST), via(BURST)];
    const pacedTargets = [direct(PACED), via(PACED)];
    for (const target of targets) {
      const probe = await stream(target);
      if (probe.events !== STREAM_WORDS + 4) throw new Error(`${target.name} streamed ${probe.events} events, expected ${STREAM_WORDS + 4}`);
    }
    say("warm-up");
    for (const target of targets) await throughputPhase(target, reelay.proc.pid, fake.pid, 1);

    say(`time to first chunk: ${TTFC_SAMPLES} sequential streams per target`);
    // `reelay serve` also hosts the runner and projector, which use some CPU while idle: measured here and
    // taken out of the gateway's figures below, so they count relaying only.
    const idleBefore = cpuMicros(reelay.proc.pid);
    await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
    const idleCpuUsPerS = (cpuMicros(reelay.proc.pid) - idleBefore) / IDLE_SECONDS;
    // Only the reelay half of this phase reaches the gateway: its CPU over the phase is per short stream.
    const gatewayBefore = cpuMicros(reelay.proc.pid);
    const upstreamBefore = cpuMicros(fake.pid);
    const ttfcStarted = performance.now();
    const ttfc = await ttfcPhase(pacedTargets);
    const ttfcSeconds = (performance.now() - ttfcStarted) / 1000;
    const shortStream = {
      gatewayCpuUs: (cpuMicros(reelay.proc.pid) - gatewayBefore - idleCpuUsPerS * ttfcSeconds) / TTFC_SAMPLES,
      // The fake served both halves of the phase.
      upstreamCpuUs: (cpuMicros(fake.pid) - upstreamBefore) / (2 * TTFC_SAMPLES),
    };
    const gatewayPid = reelay.proc.pid;
    /** Alternating rounds of direct and relayed streams; each target's rounds summed. */
    const throughputRounds = async (layout: string): Promise<Map<string, Throughput[]>> => {
      const runs = new Map<string, Throughput[]>();
      for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
        for (const target of targets) {
          say(`${layout} throughput round ${round + 1}/${THROUGHPUT_ROUNDS}: ${target.name}, ${CONCURRENT_STREAMS} concurrent streams`);
          runs.set(target.name, [...(runs.get(target.name) ?? []), await throughputPhase(target, gatewayPid, fake.pid, THROUGHPUT_SECONDS)]);
        }
      }
      return runs;
    };
    const runs = await throughputRounds("shared-core");
    const relayed = sum(runs.get("reelay") ?? []);
    relayed.gatewayCpuUs -= idleCpuUsPerS * relayed.seconds;

    // The usual proxy layout: the gateway on a core of its own, the upstream (and the load) on the other.
    // Here the ratio says whether the gateway holds throughput back, not how CPU is shared.
    pinProcess(fake.pid, LOAD_CPU);
    const ownCore = await throughputRounds("own-core");
    const ownCoreRatio = rate(sum(ownCore.get("reelay") ?? [])) / rate(sum(ownCore.get("direct") ?? []));

    // Metrics on vs off, same layout (gateway alone on its core), alternating rounds; CPU per streamed request.
    const metricsOff: Target = { ...via(BURST), name: "reelay, metrics off", port: Number(new URL(unmeasured.baseUrl).port) };
    const measuredRuns: Throughput[] = [];
    const unmeasuredRuns: Throughput[] = [];
    for (let round = 0; round < THROUGHPUT_ROUNDS; round++) {
      say(`metrics cost round ${round + 1}/${THROUGHPUT_ROUNDS}`);
      measuredRuns.push(await throughputPhase(via(BURST), gatewayPid, fake.pid, THROUGHPUT_SECONDS));
      unmeasuredRuns.push(await throughputPhase(metricsOff, unmeasured.proc.pid, fake.pid, THROUGHPUT_SECONDS));
    }
    const cpuPerStream = (t: Throughput) => (t.gatewayCpuUs - idleCpuUsPerS * t.seconds) / t.streams;
    const on = cpuPerStream(sum(measuredRuns));
    const off = cpuPerStream(sum(unmeasuredRuns));
    return [
      ...rows(ttfc, shortStream, idleCpuUsPerS, sum(runs.get("direct") ?? []), relayed),
      {
        suite: SUITE,
        metric: `relayed chunks/s, gateway on its own core (vs direct)`,
        value: rate(sum(ownCore.get("reelay") ?? [])),
        unit: "chunks/s",
        baseline: rate(sum(ownCore.get("direct") ?? [])),
        ratio: ownCoreRatio,
        target: ">= 0.8",
      },
      { suite: SUITE, metric: "gateway CPU per streamed request, metrics on (vs off)", value: on, unit: "µs", baseline: off, ratio: on / off, target: "<= 1.03x" },
    ];
  } catch (error) {
    if (reelay) process.stderr.write(`--- last lines of reelay's log ---\n${logTail(reelay.logFile)}\n`);
    throw error;
  } finally {
    agent.destroy();
    if (ownCpus) pinProcess(process.pid, ownCpus);
    for (const stop of stops.reverse()) await stop().catch((error: unknown) => say(`cleanup failed: ${(error as Error).message}`));
    rmSync(workDir, { recursive: true, force: true });
  }
}

const rate = (t: Throughput) => t.events / t.seconds;

function rows(
  ttfc: Map<string, number[]>,
  shortStream: { gatewayCpuUs: number; upstreamCpuUs: number },
  idleCpuUsPerS: number, direct: Throughput, via: Throughput): BenchRow[] {
  const d = ttfc.get("direct") ?? [];
  const r = ttfc.get("reelay") ?? [];
  const directRate = rate(direct);
  const viaRate = rate(via);
  // With gateway and upstream on one core, relayed throughput cannot exceed this share of direct.
  const cap = via.upstreamCpuUs / (via.upstreamCpuUs + via.gatewayCpuUs);
  return [
    { suite: SUITE, metric: "added time to first chunk p50 (paced stream)", value: (percentile(r, 50) - percentile(d, 50)) * 1000, unit: "µs", baseline: percentile(d, 50) * 1000, target: "< 1000µs" },
    { suite: SUITE, metric: "added time to first chunk p99 (paced stream)", value: (percentile(r, 99) - percentile(d, 99)) * 1000, unit: "µs", baseline: percentile(d, 99) * 1000 },
    // Sharing one core with the upstream, this cannot pass `cap` below: the figure that compares gateways
    // here is CPU per request (stack notes); the throughput target applies to the own-core layout.
    { suite: SUITE, metric: `relayed chunks/s, one core shared with upstream (${CONCURRENT_STREAMS} streams, vs direct)`, value: viaRate, unit: "chunks/s", baseline: directRate, ratio: viaRate / directRate },
    { suite: SUITE, metric: "relayed streams/s (vs direct)", value: via.streams / via.seconds, unit: "req/s", baseline: direct.streams / direct.seconds, ratio: via.streams / via.seconds / (direct.streams / direct.seconds) },
    { suite: SUITE, metric: "ratio cap: upstream CPU share (one core)", value: cap, unit: "ratio" },
    { suite: SUITE, metric: "gateway CPU per streamed request", value: via.gatewayCpuUs / via.streams, unit: "µs", baseline: via.upstreamCpuUs / via.streams, ratio: via.gatewayCpuUs / via.upstreamCpuUs },
    { suite: SUITE, metric: "gateway CPU per relayed chunk", value: via.gatewayCpuUs / via.events, unit: "µs" },
    {
      suite: SUITE,
      metric: "gateway CPU per paced stream (6 chunks, vs fake's)",
      value: shortStream.gatewayCpuUs,
      unit: "µs",
      baseline: shortStream.upstreamCpuUs,
      ratio: shortStream.gatewayCpuUs / shortStream.upstreamCpuUs,
    },
    { suite: SUITE, metric: "reelay serve idle CPU (subtracted above)", value: idleCpuUsPerS / 1e6, unit: "cores" },
    { suite: SUITE, metric: `gateway peak RSS (${CONCURRENT_STREAMS} streams)`, value: via.peakRssMiB, unit: "MiB" },
  ];
}
