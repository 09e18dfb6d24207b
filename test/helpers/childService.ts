import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ReelayConfig } from "../../contracts/config.ts";

const CLI = new URL("../../scripts/reelay.mjs", import.meta.url).pathname;

export function writeConfigFile(config: ReelayConfig): string {
  const path = join(mkdtempSync(join(tmpdir(), "reelay-config-")), "reelay.config.json");
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/**
 * A test tool's bundle (`source`: its path in the repository, "test/helpers/scriptedRunnerMain.ts", one of the
 * TEST_TOOL_ENTRIES in scripts/build.mjs), from the build the test run's set-up made (test/globalSetup.ts): it
 * starts as fast as reelay's own processes.
 */
export function compiledTestTool(source: string): string {
  const build = process.env.REELAY_TEST_BUILD;
  if (!build) throw new Error("REELAY_TEST_BUILD is not set: run the tests through vitest with test/vitest.config.ts (its set-up builds the test tools)");
  return join(build, source.replace(/\.ts$/, ".js"));
}

/**
 * A child process running services; `port` is the edge's, read from its ready line (undefined without an edge);
 * `startupOutput`: what it printed until ready; `output()`: all it printed so far (for a failing test to show).
 */
export type ServiceChild = ChildProcess & { port: number | undefined; startupOutput: string; output: () => string };

/**
 * `reelay serve <services>` as a real child process (so a test can kill -9 it), resolved once ready.
 * `["scripted-runner"]` is the runner with the scripted vendor as its provider (no renders).
 * An edge binds PORT if given, else any free port (`child.port` says which): a port picked in advance could
 * be taken by another test's server before the child binds it. The admin listener is off unless asked for.
 */
export async function startChildService(
  services: string[],
  env: {
    NATS_URL: string;
    REELAY_CONFIG: string;
    PORT?: string;
    REELAY_FAILPOINTS?: string;
    SCRIPTED_STATUS_CALLS?: string;
    REELAY_METRICS_PORT?: string;
    OTEL_EXPORTER_OTLP_ENDPOINT?: string;
    OTEL_BSP_SCHEDULE_DELAY?: string;
    /** Upstream keys, read by name from the provider entries' `apiKeyEnv`. */
    [keyVariable: string]: string | undefined;
  },
): Promise<ServiceChild> {
  const args = services[0] === "scripted-runner" ? [compiledTestTool("test/helpers/scriptedRunnerMain.ts")] : [CLI, "serve", ...services];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, PORT: "0", REELAY_ADMIN_PORT: "off", ...env, LOG_LEVEL: "info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  killedWithThisProcess(child);
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child did not start in 30 s:\n${output}`)), 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("reelay services ready") || output.includes("reelay is ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`child exited with ${code}:\n${output}`));
    });
  });
  child.removeAllListeners("exit");
  const port = /"url":"http:\/\/localhost:(\d+)"/.exec(output)?.[1];
  return Object.assign(child, { port: port === undefined ? undefined : Number(port), startupOutput: output, output: () => output });
}

export function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

/** Children still running: killed when this test process exits however it ends (a test or hook that timed out never reached its clean-up). */
const liveChildren = new Set<ChildProcess>();

function killedWithThisProcess(child: ChildProcess): void {
  if (!process.listeners("exit").includes(killLiveChildren)) {
    process.on("exit", killLiveChildren);
    // vitest stops a worker with SIGTERM, which ends a process without its "exit" event: the children go first,
    // then the signal is raised again with its default effect.
    process.once("SIGTERM", () => {
      killLiveChildren();
      process.kill(process.pid, "SIGTERM");
    });
  }
  liveChildren.add(child);
  child.once("exit", () => liveChildren.delete(child));
}

function killLiveChildren(): void {
  // An orphaned service whose nats-server is gone would otherwise spin reconnecting for good, on later files' CPU.
  for (const child of liveChildren) child.kill("SIGKILL");
}
