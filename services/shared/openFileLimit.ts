import { readFileSync } from "node:fs";

/**
 * The number of files (sockets, pipes) this process may have open: the soft limit in /proc/self/limits, which
 * Node raises to the hard limit when it starts. Undefined where it cannot be read (not Linux) or is unlimited.
 */
export function openFileLimit(limits = readProcLimits()): number | undefined {
  const line = limits?.split("\n").find((row) => row.startsWith("Max open files"));
  const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
  const value = Number(soft);
  return Number.isSafeInteger(value) && value > 0 ? value : undefined;
}

function readProcLimits(): string | undefined {
  try {
    return readFileSync("/proc/self/limits", "utf8");
  } catch {
    return undefined;
  }
}
