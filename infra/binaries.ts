import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

/** A program reelay needs: where to look for it and which Debian package provides it (nats-server: natsServerBinary.ts). */
export interface RequiredProgram {
  command: string;
  envVar: string;
  debianPackage: string;
}

export const FFMPEG: RequiredProgram = { command: "ffmpeg", envVar: "FFMPEG_BIN", debianPackage: "ffmpeg" };
/** Debian's Chromium: only the console's browser test drives it (Playwright), never the product. */
export const CHROMIUM: RequiredProgram = { command: "chromium", envVar: "CHROMIUM_BIN", debianPackage: "chromium" };
/** The HTTP load generator of `npm run bench` (bench/lib/wrk.ts), never the product. */
export const WRK: RequiredProgram = { command: "wrk", envVar: "WRK_BIN", debianPackage: "wrk" };

export class MissingProgramError extends Error {}

export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function executableOnPath(command: string, pathVariable: string | undefined = process.env.PATH): string | undefined {
  for (const dir of (pathVariable ?? "").split(delimiter)) {
    if (dir && isExecutable(join(dir, command))) return join(dir, command);
  }
  return undefined;
}

/**
 * Finds a program: the env var override, then PATH, then (as root on Debian) `apt-get install`.
 * Installing is what makes `npm start` work on a fresh machine with only Node and npm.
 */
export function locateProgram(program: RequiredProgram, say: (line: string) => void): string {
  const override = process.env[program.envVar];
  if (override) {
    if (isExecutable(override)) return override;
    throw new MissingProgramError(`${program.envVar}=${override} is not an executable file: point it at the ${program.command} binary, or unset it to use the ${program.command} on PATH`);
  }
  const found = executableOnPath(program.command);
  if (found) return found;
  const isRoot = process.getuid?.() === 0;
  if (isRoot && executableOnPath("apt-get")) {
    say(`${program.command} not found: installing Debian package ${program.debianPackage} (apt-get)`);
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    spawnSync("apt-get", ["update", "-qq"], { stdio: "ignore", env });
    const install = spawnSync("apt-get", ["install", "-y", "-qq", program.debianPackage], { stdio: "ignore", env });
    const installed = executableOnPath(program.command);
    if (install.status === 0 && installed) return installed;
  }
  throw new MissingProgramError(
    `${program.command} was not found on PATH. Install it (Debian/Ubuntu: sudo apt-get install ${program.debianPackage}) ` +
      `or point ${program.envVar} at the binary.`,
  );
}
