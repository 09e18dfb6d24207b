import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ReelayConfig } from "../../contracts/config.ts";
import { freeLoopbackPort } from "../../infra/natsServer.ts";
import { benchProfiling, REPO_ROOT, spawnTracked, waitForExit, type SpawnOptions, type Tracked } from "./procs.ts";

const CLI = join(REPO_ROOT, "scripts", "reelay.mjs");
const writeConfig = (workDir: string, config: ReelayConfig): string => {
  const path = join(workDir, "reelay.config.json");
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
};

/** Runs the `reelay` CLI against `natsUrl`, bounded in time; resolves with its output and exit code. */
async function cli(args: readonly string[], natsUrl: string, configPath: string): Promise<{ output: string; code: number | null }> {
  const proc = spawnTracked(`reelay ${args.join(" ")}`, process.execPath, [CLI, ...args], {
    env: { NATS_URL: natsUrl, REELAY_CONFIG: configPath, LOG_LEVEL: "warn" },
  });
  const output = await waitForExit(proc, 60_000);
  return { output, code: proc.exitCode() };
}

/**
 * Account `bench` with a fresh API key (`reelay keys create`, the key is the last line) and, when this
 * tree has prepaid billing (`reelay accounts credit`), a balance large enough for every task the bench creates.
 */
export async function prepareAccount(natsUrl: string, workDir: string, config: ReelayConfig): Promise<string> {
  const configPath = writeConfig(workDir, config);
  const created = await cli(["keys", "create", "--account", "bench"], natsUrl, configPath);
  const key = created.output.trim().split("\n").at(-1)?.trim() ?? "";
  if (created.code !== 0 || !/^\S{16,}$/.test(key)) throw new Error(`reelay keys create failed:\n${created.output.slice(-2000)}`);
  const credit = await cli(["accounts", "credit", "bench", "10000000"], natsUrl, configPath);
  if (credit.code !== 0 && !/unknown command/.test(credit.output)) throw new Error(`reelay accounts credit failed:\n${credit.output.slice(-2000)}`);
  return key;
}

export interface ReelayChild {
  proc: Tracked;
  baseUrl: string;
  logFile: string;
}

/**
 * `reelay serve` (edge, runner and projector in one process, as `npm start` runs them; or only the given
 * `services`) as a child process against `natsUrl`, with `config` written to the work dir; resolves once
 * it is ready (GET /healthz answers 200 when it runs the edge).
 */
export async function startReelay(options: {
  natsUrl: string;
  config: ReelayConfig;
  workDir: string;
  cpu?: string;
  services?: readonly string[];
  /** Extra environment (e.g. REELAY_METRICS=off). */
  env?: Record<string, string>;
  /** The process's open-file limit (soft and hard). */
  openFiles?: number;
}): Promise<ReelayChild> {
  const configPath = writeConfig(options.workDir, options.config);
  const port = await freeLoopbackPort();
  const services = options.services ?? [];
  const logFile = join(options.workDir, `reelay${services.length ? `-${services.join("-")}` : ""}.log`);
  const spawnOptions: SpawnOptions = {
    env: { NATS_URL: options.natsUrl, REELAY_CONFIG: configPath, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "info", ...options.env },
    logFile,
  };
  if (options.cpu !== undefined) spawnOptions.cpu = options.cpu;
  if (options.openFiles !== undefined) spawnOptions.openFiles = options.openFiles;
  // BENCH_CPU_PROF_DIR=<dir>: reelay writes a V8 CPU profile there when it stops (open it in Chrome DevTools).
  const profiling = benchProfiling();
  // BENCH_NODE_ARGS="--trace-gc …": more flags for reelay's node (V8's go to every thread; its lines land in the log).
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "");
  const proc = spawnTracked(`reelay serve ${services.join(" ")}`.trim(), process.execPath, [...profiling, ...nodeArgs, CLI, "serve", ...services], spawnOptions);
  const baseUrl = `http://127.0.0.1:${port}`;
  const withEdge = services.length === 0 || services.includes("edge");
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exited()) throw new Error(`reelay serve exited during start-up:\n${logTail(logFile)}`);
    const ready = withEdge
      ? (await fetch(`${baseUrl}/healthz`).catch(() => undefined))?.ok === true
      : logTail(logFile).includes("reelay services ready");
    if (ready) return { proc, baseUrl, logFile };
    if (Date.now() > deadline) {
      await proc.stop(1000);
      throw new Error(`reelay serve did not become healthy within 30 s:\n${logTail(logFile)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export const logTail = (logFile: string, chars = 3000): string =>
  existsSync(logFile) ? readFileSync(logFile, "utf8").slice(-chars) : "(no log)";
