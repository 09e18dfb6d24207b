import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startBenchNats } from "../lib/benchNats.ts";
import { pinProcess, pinningAvailable } from "../lib/procs.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { runWrk, type WrkResult } from "../lib/wrk.ts";
import type { BenchRow } from "../table.ts";
import { benchConfig } from "./videoPath.ts";

const SUITE = "openai-videos";
const SERVER_CPU = "0";
const LOAD_CPU = "1";
const CONNECTIONS = 32;
const ROUND_SECONDS = 3;
const ROUND_MAX = 2000;
/** Rounds alternate JSON and multipart (J M M J …): a drift over the run lands on both sides alike. */
const ORDER = ["json", "multipart", "multipart", "json", "json", "multipart"] as const;
const PARKED_MODEL = "Bench-parked";
const BOUNDARY = "----reelaybench7MA4YWxkTrZu0gW";

const say = (line: string) => process.stderr.write(`[${SUITE}] ${line}\n`);

/** The multipart body an OpenAI SDK sends for `videos.create({model, prompt, seconds, size})`. */
function multipartBody(): string {
  const fields = { model: PARKED_MODEL, prompt: "a red fox running through snow", seconds: "4", size: "1280x720" };
  return `${Object.entries(fields)
    .map(([name, value]) => `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
    .join("")}--${BOUNDARY}--\r\n`;
}

/**
 * Create through OpenAI's `POST /api/compat/videos` (multipart, as the SDKs send it) beside the spec's JSON
 * `POST /api/compat/videosGenerations`, same task, same process, same run: rounds alternate, reelay and
 * nats-server on CPU 0, wrk on CPU 1. Issue 16's target: multipart at least 0.8 of the JSON rate.
 */
export async function openAiVideosCreateBench(): Promise<BenchRow[]> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-bench-openai-"));
  const stops: Array<() => Promise<void>> = [];
  try {
    if (!pinningAvailable) say("taskset not found: processes run unpinned, ratios are less meaningful");
    const nats = await startBenchNats(workDir, say);
    stops.push(() => nats.stop());
    const natsPid = nats.pid;
    const config = benchConfig();
    const key = await prepareAccount(nats.url, workDir, config);
    const reelay = await startReelay({ natsUrl: nats.url, config, workDir, cpu: SERVER_CPU });
    stops.push(() => reelay.proc.stop(10_000));
    pinProcess(natsPid, SERVER_CPU);
    const common = { workDir, cpu: LOAD_CPU, connections: CONNECTIONS, timeoutS: 15, method: "POST" as const };
    const requests = {
      json: {
        ...common,
        url: `${reelay.baseUrl}/api/compat/videosGenerations`,
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ model: PARKED_MODEL, prompt: "a red fox running through snow", duration: 4, ratio: "16:9" }),
      },
      multipart: {
        ...common,
        url: `${reelay.baseUrl}/api/compat/videos`,
        headers: { Authorization: `Bearer ${key}`, "Content-Type": `multipart/form-data; boundary=${BOUNDARY}` },
        body: multipartBody(),
      },
    };
    await runWrk({ ...requests.json, name: "warm-json", durationS: 1, maxResponses: 300 });
    await runWrk({ ...requests.multipart, name: "warm-multipart", durationS: 1, maxResponses: 300 });
    const results: Record<(typeof ORDER)[number], WrkResult[]> = { json: [], multipart: [] };
    for (const [round, kind] of ORDER.entries()) {
      const run = await runWrk({ ...requests[kind], name: `${kind}-${round}`, durationS: ROUND_SECONDS, maxResponses: ROUND_MAX });
      if (run.errors > 0) say(`${kind} round ${round}: ${run.errors} errors`);
      results[kind].push(run);
    }
    const rate = (runs: WrkResult[]) => runs.reduce((sum, run) => sum + run.status200, 0) / runs.reduce((sum, run) => sum + run.durationS, 0);
    const p99 = (runs: WrkResult[]) => Math.max(...runs.map((run) => run.p99Ms));
    const json = rate(results.json);
    const multipart = rate(results.multipart);
    const errors = [...results.json, ...results.multipart].reduce((sum, run) => sum + run.errors, 0);
    return [
      { suite: SUITE, metric: "create, spec JSON (POST videosGenerations), 1 server core", value: json, unit: "tasks/s" },
      { suite: SUITE, metric: "create, OpenAI multipart (POST /videos), 1 server core (vs JSON)", value: multipart, unit: "tasks/s", baseline: json, ratio: multipart / json, target: ">= 0.8x" },
      { suite: SUITE, metric: "create p99, spec JSON", value: p99(results.json), unit: "ms" },
      { suite: SUITE, metric: "create p99, OpenAI multipart", value: p99(results.multipart), unit: "ms" },
      ...(errors > 0 ? [{ suite: SUITE, metric: "create errors (non-200, socket)", value: errors, unit: "count", target: "<= 0/run" }] : []),
    ];
  } finally {
    for (const stop of stops.reverse()) await stop().catch((error: unknown) => say(`cleanup: ${(error as Error).message}`));
    rmSync(workDir, { recursive: true, force: true });
  }
}
