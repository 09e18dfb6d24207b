import { spawnSync } from "node:child_process";
import { ReelayEnvironment } from "../contracts/environment.ts";
import { executableOnPath } from "./binaries.ts";

/**
 * How reelay's processes (and the nats-server it starts) ask Linux to schedule them. `batch` is SCHED_BATCH:
 * the same fair share of the CPU, but a thread that wakes (a message arrived) does not preempt the one
 * running; it waits for the running one's slice instead. Reelay's threads and nats-server hand every create to
 * each other over loopback sockets, and with wakeup preemption each hand-off stopped the sender mid-turn: on 2
 * cores SCHED_BATCH cut the CPU per create by 7–9% and raised creates/s by 5–10% (docs/decisions.md,
 * "CPU scheduling"). `normal` leaves the policy as inherited. Any user may choose SCHED_BATCH for their own
 * processes (no privilege); where `chrt` (util-linux) is missing, or off Linux, nothing changes.
 */
export type CpuScheduling = "batch" | "normal";

/** REELAY_SCHEDULING as the environment sets it (`batch` when unset); a bad value throws naming the variable's values. */
export const configuredScheduling = (env: NodeJS.ProcessEnv = process.env): CpuScheduling => ReelayEnvironment.shape.REELAY_SCHEDULING.parse(env.REELAY_SCHEDULING);

const chrtPath = (): string | undefined => (process.platform === "linux" ? executableOnPath("chrt") : undefined);

/** The command prefix that starts a program under `scheduling` (empty: start it as it is). */
export function scheduledCommand(scheduling: CpuScheduling): string[] {
  const chrt = scheduling === "batch" ? chrtPath() : undefined;
  return chrt === undefined ? [] : [chrt, "--batch", "0"];
}

/**
 * Puts every thread of process `pid` under `scheduling` (threads it starts later inherit it from theirs).
 * Whether the policy is now in force: false when it could not be set (no chrt, not Linux, refused).
 */
export function scheduleProcess(scheduling: CpuScheduling, pid: number = process.pid): boolean {
  if (scheduling === "normal") return false;
  const chrt = chrtPath();
  if (chrt === undefined) return false;
  return spawnSync(chrt, ["--all-tasks", "--batch", "--pid", "0", String(pid)], { stdio: "ignore" }).status === 0;
}
