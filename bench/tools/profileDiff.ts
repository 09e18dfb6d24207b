/**
 * Where one thread spends more than another, by package: `node --import tsx bench/tools/profileDiff.ts
 * <reelay.cpuprofile> <floor.cpuprofile> [tasks]`. Made for a thread of reelay against the same thread of a
 * floor that did the same tasks in the same run: `BENCH_CPU_PROF_DIR=<dir> npm run bench -- --only instant`
 * profiles both (bench/lib/procs.ts). Thread files end `.<n>.<seq>.cpuprofile`: reelay's 0 is the edge, 1 the
 * projector, 2 the runner; createFloor.ts's 0 is its edge, 2 its runner, 3 its projector (its others are tsx's
 * loader threads). Prints each package's CPU (busy samples, idle left out) in both and the difference, largest
 * first; with `tasks` (both runs did that many: the instant suite's 11,000), µs per task instead of ms.
 * The times are a sampling profiler's: wall time while the thread was not idle, preemption included, so on a
 * loaded machine they add up to more than the thread's CPU in /proc (about twice, on 2 cores under the
 * instant suite) and a system call that woke another process looks long. Compare packages with each other.
 */
import { readProfile, samplesByPackage } from "./profileTop.ts";

const [reelayFile, floorFile, tasksArg] = process.argv.slice(2);
if (!reelayFile || !floorFile) throw new Error("usage: bench/tools/profileDiff.ts <reelay.cpuprofile> <floor.cpuprofile> [tasks]");
const tasks = tasksArg === undefined ? undefined : Number(tasksArg);
const IDLE = "(idle)";

/** Each package's busy time in the profile, in µs. */
function busyMicros(file: string): Map<string, number> {
  const { byPackage, sampleMicros } = samplesByPackage(readProfile(file));
  byPackage.delete(IDLE);
  return new Map([...byPackage].map(([pkg, samples]) => [pkg, samples * sampleMicros]));
}

const reelay = busyMicros(reelayFile);
const floor = busyMicros(floorFile);
const scale = (micros: number) => (tasks ? micros / tasks : micros / 1000);
const unit = tasks ? "µs/task" : "ms";
const sum = (times: Map<string, number>) => [...times.values()].reduce((total, micros) => total + micros, 0);
const column = (value: number) => scale(value).toFixed(1).padStart(9);

process.stdout.write(`${"reelay".padStart(9)}${"floor".padStart(9)}${"more".padStart(9)}  (${unit})\n`);
process.stdout.write(`${column(sum(reelay))}${column(sum(floor))}${column(sum(reelay) - sum(floor))}  all busy\n`);
const packages = [...new Set([...reelay.keys(), ...floor.keys()])];
const more = (pkg: string) => (reelay.get(pkg) ?? 0) - (floor.get(pkg) ?? 0);
for (const pkg of packages.sort((a, b) => more(b) - more(a)).slice(0, 25)) {
  process.stdout.write(`${column(reelay.get(pkg) ?? 0)}${column(floor.get(pkg) ?? 0)}${column(more(pkg))}  ${pkg}\n`);
}
