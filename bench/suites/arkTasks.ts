import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as natsConnect } from "@nats-io/transport-node";
import { ProviderSettings } from "../../contracts/config.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { policyOf } from "../../services/runner/policy/providerPolicy.ts";
import { pollDelay } from "../../machines/liveTaskSchedule.ts";
import { loadConfig } from "../../services/shared/config.ts";
import { ArkUpstream } from "../../test/fakes/arkUpstream.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { createConcurrently, videoCreator, watchFinals } from "../lib/taskLoad.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "ark";
const TASKS = 500;
const IN_FLIGHT = 64;
const CALL_MS = 50;
const KEY_ENV = "BENCH_ARK_KEY";
const KEY = "bench-ark-key";

const suiteStart = performance.now();
const say = (line: string) => process.stderr.write(`[${SUITE} +${((performance.now() - suiteStart) / 1000).toFixed(1)}s] ${line}\n`);

/**
 * Upstream calls one task costs under the shipped Ark polling policy, for a generation of `generationMs`:
 * the create, then status calls on the schedule until one lands after the video is done. Also how late
 * the runner learns of it (without a callback). Computed from the runner's own schedule function.
 */
function callsForGeneration(generationMs: number): { calls: number; lateMs: number } {
  const policy = policyOf(ProviderSettings.parse({ kind: "ark", baseUrl: "https://ark.cn-beijing.volces.com/api/v3", apiKeyEnv: "ARK_API_KEY" }) as Extract<ProviderSettings, { kind: "ark" }>);
  let at = 0;
  let polls = 0;
  while (at < generationMs) at += pollDelay(policy, polls++);
  return { calls: 1 + polls, lateMs: at - generationMs };
}

/**
 * Seedance through reelay against the fake Ark server (test/fakes/arkUpstream.ts) answering every call after
 * CALL_MS, as a remote API would: TASKS creates, IN_FLIGHT at a time, each finishing at its first status call
 * (polled at once), its result downloaded and copied into the object store. The baseline is the same run
 * against the fake answering at once, so the ratio is what a 50 ms upstream costs reelay's throughput.
 */
export async function arkTasksBench(): Promise<BenchRow[]> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-bench-ark-"));
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say });
    stops.push(() => nats.stop());
    const ark = new ArkUpstream(KEY);
    await ark.start();
    stops.push(() => ark.stop());
    ark.generation = { kind: "succeed", afterPolls: 1 };
    const config = loadConfig();
    config.providers.ark = ProviderSettings.parse({ kind: "ark", baseUrl: ark.baseUrl, apiKeyEnv: KEY_ENV, maxInFlight: 5000, pollFirstAfterMs: 0, pollEveryMs: 10, pollMaxEveryMs: 10 });
    const seedance = config.videoModels["Seedance-2.0"];
    if (!seedance) throw new Error("the shipped config has no Seedance-2.0");
    Object.assign(seedance, { enabled: true, provider: "ark", upstreamModel: "doubao-seedance-2-0-260128" });
    config.runner.allowPrivateResultUrls = true;
    const key = await prepareAccount(nats.url, workDir, config);
    const reelay = await startReelay({ natsUrl: nats.url, config, workDir, env: { [KEY_ENV]: KEY } });
    stops.push(() => reelay.proc.stop(15_000));

    const nc = await natsConnect({ servers: nats.url });
    stops.push(() => nc.close());
    const watch = await watchFinals(nc);
    const finals = () => watch.succeeded + watch.failed;
    const create = videoCreator(reelay.baseUrl, [key], { model: "Seedance-2.0", prompt: "ark bench", duration: 5 });
    /** TASKS tasks through reelay with the fake answering after `callMs`; tasks/s create→final and calls per task. */
    const round = async (callMs: number, tasks = TASKS) => {
      ark.callDelayMs = callMs;
      const [finalsBefore, callsBefore] = [finals(), ark.calls.length];
      say(`${tasks} creates, ${IN_FLIGHT} in flight, Ark answering after ${callMs} ms`);
      const started = performance.now();
      await createConcurrently(tasks, IN_FLIGHT, create);
      const deadline = Date.now() + 120_000;
      while (finals() - finalsBefore < tasks && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      if (finals() - finalsBefore < tasks || watch.failed > 0) throw new Error(`${finals() - finalsBefore} of ${tasks} tasks final, ${watch.failed} failed`);
      return { tasksPerSecond: tasks / ((watch.lastFinal - started) / 1000), callsPerTask: (ark.calls.length - callsBefore) / tasks };
    };
    // A first round warms the JIT and the connections up; then each setting twice, alternating, best kept.
    await round(0, 200);
    const [instantA, remoteA, instantB, remoteB] = [await round(0), await round(CALL_MS), await round(0), await round(CALL_MS)];
    const instant = instantA.tasksPerSecond > instantB.tasksPerSecond ? instantA : instantB;
    const remote = remoteA.tasksPerSecond > remoteB.tasksPerSecond ? remoteA : remoteB;
    watch.stop();
    const sixty = callsForGeneration(60_000);
    return [
      {
        suite: SUITE,
        metric: `create→success on fake Ark at ${CALL_MS} ms per call (${TASKS} tasks, ${IN_FLIGHT} creates in flight, best of 2; baseline: fake answering at once)`,
        value: remote.tasksPerSecond,
        unit: "tasks/s",
        baseline: instant.tasksPerSecond,
        ratio: remote.tasksPerSecond / instant.tasksPerSecond,
      },
      { suite: SUITE, metric: "Ark API calls per task in this run (create + status; the result download not counted)", value: remote.callsPerTask, unit: "calls" },
      { suite: SUITE, metric: "Ark API calls for a 60 s generation under the shipped polling policy (no callback)", value: sixty.calls, unit: "calls" },
      { suite: SUITE, metric: "… and how late the runner learns the 60 s generation finished (with a callback: at once)", value: sixty.lateMs / 1000, unit: "s" },
    ];
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
}
