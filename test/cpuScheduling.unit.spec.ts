import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { executableOnPath } from "../infra/binaries.ts";
import { configuredScheduling, scheduledCommand, scheduleProcess } from "../infra/cpuScheduling.ts";

/** SCHED_BATCH's number in sched(7), as /proc/<pid>/task/<tid>/stat reports a thread's policy (field 41). */
const SCHED_BATCH = 3;

/** Every thread's scheduling policy: the stat line's fields after the command's closing parenthesis. */
function policies(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Field 41 of the line is the 39th after the command (fields 1 and 2 are pid and command).
    return Number(fields[38]);
  });
}

const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill("SIGKILL");
});

function startNode(prefix: readonly string[] = []): ChildProcess {
  // A node process has threads of its own (V8's helpers, libuv's), so "every thread" is tested.
  const [command = process.execPath, ...args] = [...prefix, process.execPath, "-e", "setInterval(() => {}, 1000)"];
  const child = spawn(command, args, { stdio: "ignore" });
  started.push(child);
  return child;
}

const untilThreads = async (pid: number): Promise<void> => {
  for (let i = 0; i < 100 && policies(pid).length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
};

describe.skipIf(process.platform !== "linux" || executableOnPath("chrt") === undefined)("CPU scheduling (SCHED_BATCH through chrt)", () => {
  it("starts a program under SCHED_BATCH, with the program's own pid (chrt execs it)", async () => {
    const child = startNode(scheduledCommand("batch"));
    const pid = child.pid ?? 0;
    await untilThreads(pid);
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0]).toBe(process.execPath);
    expect(new Set(policies(pid))).toEqual(new Set([SCHED_BATCH]));
  });

  it("moves every thread of a running process to SCHED_BATCH; `normal` leaves it as inherited", async () => {
    const child = startNode();
    const pid = child.pid ?? 0;
    await untilThreads(pid);
    const inherited = new Set(policies(process.pid));
    expect(scheduleProcess("normal", pid)).toBe(false);
    expect(new Set(policies(pid))).toEqual(inherited);
    expect(scheduleProcess("batch", pid)).toBe(true);
    expect(new Set(policies(pid))).toEqual(new Set([SCHED_BATCH]));
  });

  it("adds nothing in front of a program for `normal`", () => {
    expect(scheduledCommand("normal")).toEqual([]);
  });

  it("reports failure for a process that is not there, instead of throwing", () => {
    expect(scheduleProcess("batch", 2 ** 22 + 1)).toBe(false);
  });
});

describe("REELAY_SCHEDULING", () => {
  it("is batch unless set to normal, and a value it does not know stops start-up", () => {
    expect(configuredScheduling({})).toBe("batch");
    expect(configuredScheduling({ REELAY_SCHEDULING: "" })).toBe("batch");
    expect(configuredScheduling({ REELAY_SCHEDULING: "normal" })).toBe("normal");
    expect(() => configuredScheduling({ REELAY_SCHEDULING: "realtime" })).toThrow(/batch|normal/);
  });
});
