/**
 * Where the instant suite's CPU goes, per thread: `node --import tsx bench/tools/instantCpuSplit.ts [tasks] [--parked]`.
 * `--parked`: the create path instead (the video suite's "create accepted"): creates of its parked model from
 * its 20 accounts, each counted at its answer (the task then waits 10 minutes in the runner).
 * Starts nats-server, the instant suite's fake upstream and `reelay serve` as the suite does, warms up with
 * 5,000 tasks, then reads every thread's CPU time from `/proc/<pid>/task/<tid>/stat` around `tasks` more
 * (default 3,000; 64 in flight) and prints µs per task for each thread of reelay, nats-server and this
 * process (the load generator and the fake upstream). Names: `main` is a process's main thread (reelay's
 * edge); reelay's runner and projector are worker threads (the runner is the busiest), V8's helper threads
 * (garbage collection) are the four alike; nats-server's threads are summed. Beside each: the part spent in the
 * kernel, and write and read system calls per task (proc(5)'s `syscw`, `syscr`: sockets and files); then the
 * time each reelay thread's loop stood still for V8's collector per task, by kind (its `/metrics`). `BENCH_NODE_ARGS` gives reelay's node more flags (bench/lib/reelayChild.ts; V8's too, which NODE_OPTIONS refuses in part).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { connect } from "@nats-io/transport-node";
import { startNatsServer } from "../../infra/natsServer.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { prepareAccounts } from "../lib/benchAccounts.ts";
import { programPid } from "../lib/procs.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { benchConfig, PARKED_MAX_IN_FLIGHT } from "../suites/videoPath.ts";
import { createConcurrently, videoCreator, watchFinals } from "../lib/taskLoad.ts";
import { parseSamples } from "../../test/helpers/promText.ts";

/** As the instant suite's cold phase and first window: the gateway runs slower until then. */
const WARM_UP_TASKS = 5000;
const IN_FLIGHT = 64;
const NO_USE: ThreadUse = { cpu: 0, system: 0, writes: 0, reads: 0 };
const tasks = Number(process.argv[2] ?? 3000);
const parked = process.argv.includes("--parked");
// Parked tasks never end: past the parked model's capacity the runner hands every later opening back, and the
// creates wait (a run of 37 creates/s measured that, not the create path).
if (parked && WARM_UP_TASKS + tasks > PARKED_MAX_IN_FLIGHT) {
  process.stderr.write(`--parked: at most ${PARKED_MAX_IN_FLIGHT - WARM_UP_TASKS} tasks (the parked model holds ${PARKED_MAX_IN_FLIGHT}, ${WARM_UP_TASKS} of them the warm-up's)\n`);
  process.exit(2);
}
/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim());

const workDir = mkdtempSync(join(tmpdir(), "reelay-cpu-split-"));
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const { upstream, config: instantConfig, env } = await instantVideoUpstream({ pollEveryMs: 10, maxInFlight: 5000 });
const config = parked ? benchConfig() : instantConfig;
const keys = parked ? await prepareAccounts(nats.url, config, 20, "tenant") : [await prepareAccount(nats.url, workDir, config)];
const reelay = await startReelay({ natsUrl: nats.url, config, workDir, env });
const nc = await connect({ servers: nats.url });
const finals = await watchFinals(nc);
const create = videoCreator(reelay.baseUrl, keys, { model: parked ? "Bench-parked" : "VideoModel-2.0-mini", prompt: "instant bench", duration: 4, generate_audio: false });

try {
  await createConcurrently(WARM_UP_TASKS, IN_FLIGHT, create);
  await pause(2000);
  const processes = [
    { label: "reelay", pid: reelay.proc.pid },
    { label: "nats-server", pid: programPid(nats.pid, "nats-server") },
    { label: "bench", pid: process.pid },
  ];
  const pausedBefore = await gcPauses(reelay.baseUrl);
  const before = threadUse(processes);
  const started = performance.now();
  finals.succeeded = 0;
  await createConcurrently(tasks, IN_FLIGHT, create);
  while (!parked && finals.succeeded < tasks) await pause(10);
  const seconds = (performance.now() - started) / 1000;
  const after = threadUse(processes);
  const pausedAfter = await gcPauses(reelay.baseUrl);

  const rows = [...after]
    .map(([thread, use]) => {
      const earlier = before.get(thread) ?? NO_USE;
      const perTask = (ticks: number) => (ticks / TICKS_PER_SECOND / tasks) * 1e6;
      return { thread, micros: perTask(use.cpu - earlier.cpu), systemMicros: perTask(use.system - earlier.system), writes: (use.writes - earlier.writes) / tasks, reads: (use.reads - earlier.reads) / tasks };
    })
    .filter(({ micros }) => micros >= 5)
    .sort((a, b) => b.micros - a.micros);
  process.stdout.write(`${(tasks / seconds).toFixed(0)} ${parked ? "creates" : "tasks"}/s\n   CPU per task (in the kernel)   writes  reads (system calls per task)\n`);
  for (const { thread, micros, systemMicros, writes, reads } of rows)
    process.stdout.write(`${micros.toFixed(0).padStart(6)} µs/task (${systemMicros.toFixed(0).padStart(4)})  ${writes.toFixed(1).padStart(6)} ${reads.toFixed(1).padStart(6)}  ${thread}\n`);
  process.stdout.write(`${rows.reduce((sum, { micros }) => sum + micros, 0).toFixed(0).padStart(6)} µs/task  in all\n`);
  process.stdout.write("   collector pauses per task (the thread's loop stood still; part of its CPU above)\n");
  for (const [key, secondsPaused] of [...pausedAfter].sort(([a], [b]) => a.localeCompare(b))) {
    const micros = ((secondsPaused - (pausedBefore.get(key) ?? 0)) / tasks) * 1e6;
    if (micros >= 0.5) process.stdout.write(`${micros.toFixed(1).padStart(6)} µs/task  reelay:${key}\n`);
  }
} finally {
  finals.stop();
  await nc.close();
  await reelay.proc.stop(15_000);
  await nats.stop();
  await upstream.stop();
  if (process.env.BENCH_KEEP_WORKDIR === "1") process.stdout.write(`kept ${workDir}\n`);
  else rmSync(workDir, { recursive: true, force: true });
}

/** User + system ticks and read and write system calls of every thread of the processes, keyed `<process>:<thread name> <tid>`. */
function threadUse(processes: ReadonlyArray<{ label: string; pid: number }>): Map<string, ThreadUse> {
  const ticks = new Map<string, ThreadUse>();
  for (const { label, pid } of processes) {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      } catch {
        continue; // the thread ended between listing and reading
      }
      // Go schedules goroutines on any thread: nats-server is one row.
      const name = label === "nats-server" ? "all threads" : tid === String(pid) ? "main" : `${stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))} ${tid}`;
      // Fields after the command name: utime and stime are the 12th and 13th (stat(5): fields 14 and 15).
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const key = `${label}:${name}`;
      const previous = ticks.get(key) ?? NO_USE;
      const io = systemCalls(`/proc/${pid}/task/${tid}/io`);
      ticks.set(key, { cpu: previous.cpu + Number(fields[11]) + Number(fields[12]), system: previous.system + Number(fields[12]), writes: previous.writes + io.writes, reads: previous.reads + io.reads });
    }
  }
  return ticks;
}

interface ThreadUse {
  /** User and system time, in clock ticks. */
  cpu: number;
  /** Of which in the kernel. */
  system: number;
  writes: number;
  reads: number;
}

/** A thread's read and write system calls so far (`syscr`, `syscw` of proc(5)'s io file; 0 if unreadable). */
function systemCalls(ioFile: string): { reads: number; writes: number } {
  try {
    const io = readFileSync(ioFile, "utf8");
    return { reads: Number(/syscr: (\d+)/.exec(io)?.[1] ?? 0), writes: Number(/syscw: (\d+)/.exec(io)?.[1] ?? 0) };
  } catch {
    return { reads: 0, writes: 0 };
  }
}

/** Seconds each reelay thread was paused by its collector so far, keyed `<thread> <kind>` (its `/metrics`). */
async function gcPauses(baseUrl: string): Promise<Map<string, number>> {
  const samples = parseSamples(await (await fetch(`${baseUrl}/metrics`)).text());
  const paused = new Map<string, number>();
  for (const { name, labels, value } of samples) if (name === "reelay_thread_gc_pause_seconds_total") paused.set(`${labels.thread} ${labels.kind}`, value);
  return paused;
}
