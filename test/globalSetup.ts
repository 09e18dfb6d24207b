import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { CHROMIUM, FFMPEG, locateProgram } from "../infra/binaries.ts";
import { locateNatsServer } from "../infra/natsServerBinary.ts";

/**
 * Finds (or fetches, once) the nats-server, ffmpeg and Chromium the whole run uses, exactly as `npm start` does, and
 * hands them to every test worker and child process through NATS_SERVER_BIN and FFMPEG_BIN: one look-up,
 * one install at most, before any test starts (an install racing the tests made renders fail).
 */
export default function setup(): () => void {
  const say = (line: string): void => void process.stderr.write(`reelay tests: ${line}\n`);
  const server = locateNatsServer({ say });
  say(`nats-server ${server.version} (${server.source}: ${server.path})`);
  process.env.NATS_SERVER_BIN = server.path;
  process.env.FFMPEG_BIN = locateProgram(FFMPEG, say);
  // The console's browser test drives Debian's Chromium through Playwright (installed like ffmpeg when missing).
  process.env.CHROMIUM_BIN = locateProgram(CHROMIUM, say);
  // Every temporary file of the run (stores, configs, renders, browser profiles, of workers and children) goes
  // under one folder, removed at the end: tests killed mid-way, and helpers without a stop, left them behind.
  // (Each vitest project runs this set-up: the first one makes the folder.)
  if (process.env.REELAY_TEST_TMPDIR) return () => undefined;
  const runDir = mkdtempSync(join(tmpdir(), "reelay-test-run-"));
  // tsx keeps its cache of compiled modules in the temporary folder: the run's child processes use the usual
  // one (a cold cache cost every run about a second of CPU per service a child loads first). Removing the run
  // folder removes the link, not the cache.
  const tsxCache = `tsx-${process.geteuid?.() ?? userInfo().username}`;
  mkdirSync(join(tmpdir(), tsxCache), { recursive: true });
  symlinkSync(join(tmpdir(), tsxCache), join(runDir, tsxCache));
  process.env.REELAY_TEST_TMPDIR = runDir;
  process.env.TMPDIR = runDir;
  return () => rmSync(runDir, { recursive: true, force: true });
}
