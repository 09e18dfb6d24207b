import { accessSync, constants, mkdtempSync, rmSync, statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBuild } from "../scripts/build.mjs";
import { CHROMIUM, FFMPEG, locateProgram } from "../infra/binaries.ts";
import { locateNatsServer } from "../infra/natsServerBinary.ts";

/**
 * Finds (or fetches, once) the nats-server, ffmpeg and Chromium the whole run uses, exactly as `npm start` does, and
 * hands them to every test worker and child process through NATS_SERVER_BIN and FFMPEG_BIN: one look-up,
 * one install at most, before any test starts (an install racing the tests made renders fail). Compiles reelay
 * (scripts/build.mjs) the same way, once, before any test starts a child process that runs it.
 */
export default async function setup(): Promise<() => void> {
  const say = (line: string): void => void process.stderr.write(`reelay tests: ${line}\n`);
  const server = locateNatsServer({ say });
  say(`nats-server ${server.version} (${server.source}: ${server.path})`);
  process.env.NATS_SERVER_BIN = server.path;
  process.env.FFMPEG_BIN = locateProgram(FFMPEG, say);
  // The console's browser test drives Debian's Chromium through Playwright (installed like ffmpeg when missing).
  process.env.CHROMIUM_BIN = locateProgram(CHROMIUM, say);
  // Children run the build: `reelay` through scripts/reelay.mjs (which finds this build), and the test's own
  // processes (scripted runner, probes) from the build with the test tools, named by REELAY_TEST_BUILD.
  const [, withTestTools] = await Promise.all([ensureBuild({ say }), ensureBuild({ testTools: true, say })]);
  process.env.REELAY_TEST_BUILD = withTestTools;
  // Every temporary file of the run (stores, configs, renders, browser profiles, of workers and children) goes
  // under one folder, removed at the end: tests killed mid-way, and helpers without a stop, left them behind.
  // (Each vitest project runs this set-up: the first one makes the folder.)
  if (process.env.REELAY_TEST_TMPDIR) return () => undefined;
  const runDir = mkdtempSync(join(temporaryBase(), "reelay-test-run-"));
  process.env.REELAY_TEST_TMPDIR = runDir;
  process.env.TMPDIR = runDir;
  return () => rmSync(runDir, { recursive: true, force: true });
}

const RAM_DISK = "/dev/shm";
/** A run's stores, renders and profiles peak far under this (about 20 MB measured at once). */
const RAM_DISK_ROOM = 2 * 1024 ** 3;

/**
 * Where the run's folder goes: a TMPDIR set by the caller; else the RAM disk when there is one with room, where
 * the 110-odd nats-servers the run starts create and delete their stores' files at half the CPU they took on
 * ext4 (13 s against 27 s, most of it the kernel's inode and block bookkeeping); else the system's temporary folder.
 */
function temporaryBase(): string {
  if (process.env.TMPDIR) return tmpdir();
  try {
    accessSync(RAM_DISK, constants.W_OK);
    const { bavail, bsize } = statfsSync(RAM_DISK);
    if (bavail * bsize >= RAM_DISK_ROOM) return RAM_DISK;
  } catch {
    // No RAM disk here (not Linux, or not mounted): the system's temporary folder.
  }
  return tmpdir();
}
