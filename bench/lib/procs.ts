import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { openSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/**
 * Processes a bench starts outside spawnTracked (nats-server from infra/natsServer.ts) are SIGKILLed when
 * the bench process exits for any reason (normal end, thrown error, Ctrl-C, watchdog) if still tracked.
 */
const livePids = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const pid of livePids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  });
}

/** Tracks a process started elsewhere for the exit hook; returns the untrack function. */
export function trackPid(pid: number): () => void {
  installExitHook();
  livePids.add(pid);
  return () => livePids.delete(pid);
}

const hasTaskset = spawnSync("taskset", ["-V"], { stdio: "ignore" }).status === 0;
export const pinningAvailable = hasTaskset;

/**
 * Every program runs under a small shell that holds our end of a pipe on fd 3: when the pipe closes
 * (stop(), or this process ending in any way, even kill -9) the shell sends the program SIGTERM. The shell
 * exits with the program's status when the program ends by itself.
 */
const WATCHDOG =
  'exec 3<&0; "$@" </dev/null & prog=$!; (read -r _ <&3; kill -TERM "$prog" 2>/dev/null) & reader=$!; ' +
  'wait "$prog"; code=$?; kill "$reader" 2>/dev/null; exit "$code"';

export interface Tracked {
  name: string;
  /** The watchdog shell. */
  child: ChildProcess;
  /** The program's own pid, found under the shell on first read (read it once the program is up). */
  readonly pid: number;
  /** Output captured so far (stdout + stderr), when not sent to a log file. */
  output(): string;
  exited(): boolean;
  exitCode(): number | null;
  /** SIGTERM (through the watchdog), then SIGKILL after `graceMs`. Resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnOptions {
  /** CPU list for taskset, e.g. "0"; ignored when taskset is missing. */
  cpu?: string;
  env?: Record<string, string>;
  /** Send stdout/stderr to this file instead of capturing them. */
  logFile?: string;
  /** The program's open-file limit, soft and hard (util-linux's prlimit, which then runs it). */
  openFiles?: number;
}

/** Spawns `command args` under the watchdog shell (through `taskset -c <cpu>` when asked, and `prlimit` for `openFiles`). */
export function spawnTracked(name: string, command: string, args: readonly string[], options: SpawnOptions = {}): Tracked {
  const pinned = options.cpu !== undefined && hasTaskset;
  const limited = options.openFiles === undefined ? [command, ...args] : ["prlimit", `--nofile=${options.openFiles}:${options.openFiles}`, command, ...args];
  const program = pinned ? ["taskset", "-c", options.cpu ?? "0", ...limited] : limited;
  const out = options.logFile ? openSync(options.logFile, "a") : "pipe";
  const child = spawn("sh", ["-c", WATCHDOG, "sh", ...program], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...options.env },
    stdio: ["pipe", out, out],
  });
  let captured = "";
  const keep = (chunk: Buffer) => {
    captured += chunk.toString();
    if (captured.length > 1_000_000) captured = captured.slice(-500_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  child.stdin?.on("error", () => undefined); // EPIPE once the shell is gone
  const shellPid = child.pid;
  if (shellPid === undefined) throw new Error(`could not start ${name}`);
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const comm = basename(command).slice(0, 15);
  let programPidCache: number | undefined;
  return {
    name,
    child,
    get pid() {
      return (programPidCache ??= programPid(shellPid, comm));
    },
    output: () => captured,
    exited,
    exitCode: () => child.exitCode,
    stop: async (graceMs = 5000) => {
      if (exited()) return;
      child.stdin?.end();
      const timer = setTimeout(() => {
        if (programPidCache !== undefined) killQuietly(programPidCache);
        child.kill("SIGKILL");
      }, graceMs);
      await gone;
      clearTimeout(timer);
    },
  };
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * BENCH_CPU_PROF_DIR=<dir>: the node flags that make a process write a V8 CPU profile of each of its threads
 * there when it stops (reelay's, and the floors' to compare with: bench/tools/profileDiff.ts).
 */
export function benchProfiling(): string[] {
  const dir = process.env.BENCH_CPU_PROF_DIR;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

/** Node running a TypeScript file of this repo through tsx; `profiled`: under benchProfiling's flags. */
export function spawnTsx(name: string, file: string, args: readonly string[], options: SpawnOptions & { profiled?: boolean } = {}): Tracked {
  const { profiled = false, ...spawnOptions } = options;
  return spawnTracked(name, process.execPath, [...(profiled ? benchProfiling() : []), "--import", "tsx", join(REPO_ROOT, file), ...args], spawnOptions);
}

/** Resolves with the first match of `pattern` in the process's output; rejects on exit or timeout. */
export function waitForOutput(proc: Tracked, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const check = () => {
      const match = pattern.exec(proc.output());
      if (match) return resolve(match);
      if (proc.exited()) return reject(new Error(`${proc.name} exited before printing ${pattern}:\n${proc.output().slice(-2000)}`));
      if (Date.now() > deadline) return reject(new Error(`${proc.name} did not print ${pattern} within ${timeoutMs} ms`));
      setTimeout(check, 20);
    };
    check();
  });
}

/** Waits for the process to exit (bounded), returning its captured output. */
export async function waitForExit(proc: Tracked, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (!proc.exited()) {
    if (Date.now() > deadline) {
      await proc.stop(1000);
      throw new Error(`${proc.name} did not finish within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return proc.output();
}

function statOf(pid: number): { comm: string; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return { comm, ppid };
  } catch {
    return undefined;
  }
}

/**
 * The pid of the program `comm` itself: `pid` when it is that program, otherwise its child of that name
 * (a launcher may wrap the program in a shell, whose pid is not the one to pin or to measure).
 */
export function programPid(pid: number, comm: string): number {
  if (isProgram(pid, statOf(pid)?.comm, comm)) return pid;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = statOf(Number(entry));
    if (stat?.ppid === pid && isProgram(Number(entry), stat.comm, comm)) return Number(entry);
  }
  throw new Error(`no process named ${comm} at or under pid ${pid}`);
}

/** Node 24 names its main thread "MainThread", which is what /proc says its process is called: the executable then tells. */
function isProgram(pid: number, actual: string | undefined, comm: string): boolean {
  if (actual === comm) return true;
  try {
    return basename(readlinkSync(`/proc/${pid}/exe`)).slice(0, 15) === comm;
  } catch {
    return false;
  }
}

/** Moves every thread of a running process onto `cpu` (threads it creates later inherit it). */
export function pinProcess(pid: number, cpu: string): void {
  if (!hasTaskset) return;
  const result = spawnSync("taskset", ["-a", "-p", "-c", cpu, String(pid)], { stdio: "ignore" });
  if (result.status !== 0) throw new Error(`taskset could not pin pid ${pid} to CPU ${cpu}`);
}

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"]).stdout?.toString().trim()) || 100;

/** User + system CPU time a process has used so far, in microseconds (from /proc/<pid>/stat). */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may contain spaces) start at field 3; utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1_000_000) / CLOCK_TICKS;
}

/** CPU used by each of `pids` while `work` runs, in microseconds. */
export async function measureCpu<T>(pids: readonly number[], work: () => Promise<T>): Promise<{ result: T; cpuUs: number[] }> {
  const before = pids.map(cpuMicros);
  const result = await work();
  const cpuUs = pids.map((pid, i) => cpuMicros(pid) - (before[i] ?? 0));
  return { result, cpuUs };
}
