import { readdirSync, readlinkSync } from "node:fs";

/**
 * This process's open descriptors of files the edge keeps on its disk (`reelay-file-*`, unlinked when opened):
 * one left open holds its disk space until it is garbage collected.
 */
export function keptFileDescriptors(): string[] {
  const targets: string[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.includes("reelay-file-")) targets.push(target);
    } catch {
      // Closed between the listing and the read (the listing's own descriptor, for one).
    }
  }
  return targets;
}
