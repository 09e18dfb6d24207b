import { CHROMIUM, FFMPEG, locateProgram } from "../infra/binaries.ts";
import { locateNatsServer } from "../infra/natsServerBinary.ts";

/**
 * Finds (or fetches, once) the nats-server, ffmpeg and Chromium the whole run uses, exactly as `npm start` does, and
 * hands them to every test worker and child process through NATS_SERVER_BIN and FFMPEG_BIN: one look-up,
 * one install at most, before any test starts (an install racing the tests made renders fail).
 */
export default function setup(): void {
  const say = (line: string): void => void process.stderr.write(`reelay tests: ${line}\n`);
  const server = locateNatsServer({ say });
  say(`nats-server ${server.version} (${server.source}: ${server.path})`);
  process.env.NATS_SERVER_BIN = server.path;
  process.env.FFMPEG_BIN = locateProgram(FFMPEG, say);
  // The console's browser test drives Debian's Chromium through Playwright (installed like ffmpeg when missing).
  process.env.CHROMIUM_BIN = locateProgram(CHROMIUM, say);
}
