import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { connect as natsConnect } from "@nats-io/transport-node";
import { startBenchNats } from "../lib/benchNats.ts";
import { prepareAccounts } from "../lib/benchAccounts.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { startReelay } from "../lib/reelayChild.ts";
import { createConcurrently, videoCreator, watchFinals } from "../lib/taskLoad.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "patches";
/**
 * The nats.js methods reelay replaces (services/shared/nats.ts), as REELAY_NATS_PATCHES names them: both, each
 * alone, and none (the client as shipped).
 */
const VARIANTS = ["both", "coalesce-writes", "settled-requests", "none"] as const;
type Variant = (typeof VARIANTS)[number];
/** Rounds over the variants, every other one in reverse order (ABBA), so a drift of the machine's speed cancels. */
const ROUNDS = 2;
/** Tasks before measuring: the JIT compiles the hot paths in the first thousands. */
const WARM_UP = 2000;
const MEASURED = 3000;
const ACCOUNTS = 20;
const IN_FLIGHT = 64;
/** Clock ticks per second of /proc's CPU times (USER_HZ). */
const TICKS_PER_SECOND = 100;

const suiteStart = performance.now();
const say = (line: string) => process.stderr.write(`[${SUITE} +${((performance.now() - suiteStart) / 1000).toFixed(1)}s] ${line}\n`);

/** CPU seconds a process has used so far, all its threads (stat(5): utime and stime). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** One `reelay serve` with `variant` on a fresh server: its create→success rate and CPU per task, warm. */
async function measure(variant: Variant): Promise<{ rate: number; cpuMicros: number }> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-bench-patches-"));
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const nats = await startBenchNats(workDir, say);
    stops.push(() => nats.stop());
    const { upstream, config, env } = await instantVideoUpstream({ pollEveryMs: 10, maxInFlight: 5000 });
    stops.push(() => upstream.stop());
    const keys = await prepareAccounts(nats.url, config, ACCOUNTS, "tenant");
    const reelay = await startReelay({ natsUrl: nats.url, config, workDir, env: { ...env, REELAY_NATS_PATCHES: variant } });
    stops.push(() => reelay.proc.stop(15_000));
    const nc = await natsConnect({ servers: nats.url });
    stops.push(() => nc.close());
    const finals = await watchFinals(nc);
    stops.push(async () => finals.stop());
    const create = videoCreator(reelay.baseUrl, keys, { model: "VideoModel-2.0-mini", prompt: "patches bench", duration: 4, generate_audio: false });
    const run = async (count: number) => {
      finals.succeeded = 0;
      finals.failed = 0;
      await createConcurrently(count, IN_FLIGHT, create);
      const deadline = Date.now() + 120_000;
      while (finals.succeeded + finals.failed < count && Date.now() < deadline) await pause(10);
      if (finals.succeeded < count) throw new Error(`${variant}: ${finals.succeeded} of ${count} tasks succeeded, ${finals.failed} failed`);
    };
    await run(WARM_UP);
    await pause(1000);
    const cpuBefore = cpuSeconds(reelay.proc.pid);
    const started = performance.now();
    await run(MEASURED);
    const seconds = (finals.lastFinal - started) / 1000;
    const cpuMicros = ((cpuSeconds(reelay.proc.pid) - cpuBefore) / MEASURED) * 1e6;
    say(`${variant}: ${(MEASURED / seconds).toFixed(0)} tasks/s, ${cpuMicros.toFixed(0)} µs of reelay's CPU per task`);
    return { rate: MEASURED / seconds, cpuMicros };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
};

/**
 * What each replaced nats.js method pays (docs/decisions.md, "Replaced client methods"): the instant suite's
 * load (creates from 20 accounts, 64 in flight, a fake upstream done at the first status call) against
 * `reelay serve` with both replacements, each alone and none, in alternating rounds; per variant the median
 * create→success rate and reelay's CPU per task (all its threads, from /proc). A replacement pays when the
 * variant without it costs more CPU per task, beyond the spread of the rounds.
 */
export async function natsClientPatchesBench(): Promise<BenchRow[]> {
  const results = new Map<Variant, Array<{ rate: number; cpuMicros: number }>>(VARIANTS.map((variant) => [variant, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) results.get(variant)?.push(await measure(variant));
  }
  const cpuOf = (variant: Variant) => median((results.get(variant) ?? []).map((result) => result.cpuMicros));
  const rows: BenchRow[] = [];
  for (const variant of VARIANTS) {
    const runs = results.get(variant) ?? [];
    const label = variant === "both" ? "both replaced (as shipped)" : variant === "none" ? "none replaced (nats.js as published)" : `only ${variant}`;
    rows.push({ suite: SUITE, metric: `${label}: create→success, median of ${ROUNDS}`, value: median(runs.map((result) => result.rate)), unit: "tasks/s" });
    rows.push({
      suite: SUITE,
      metric: `  reelay CPU per task (${runs.map((result) => result.cpuMicros.toFixed(0)).join(", ")})`,
      value: cpuOf(variant),
      unit: "µs",
      ...(variant === "none" ? {} : { baseline: cpuOf("none"), ratio: cpuOf(variant) / cpuOf("none") }),
    });
  }
  return rows;
}
