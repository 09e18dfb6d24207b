/**
 * Runs in a child process of test/localRenderShortOfFiles.int.spec.ts under a low open-file limit (prlimit): holds
 * every descriptor the process may still open, asks the local provider for a render, watches its status while no
 * file can be opened, lets the descriptors go, and prints the statuses it saw and the last one as JSON.
 */
import { closeSync, openSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { ProviderSettings } from "../../contracts/config.ts";
import { LocalProvider } from "../../services/runner/providers/local/localProvider.ts";
import type { ProviderStatus } from "../../services/runner/providers/types.ts";
import { sampleJob } from "../helpers/fixtures.ts";

const settings = ProviderSettings.parse({ kind: "local", queueDelayMs: 0, encoderPreset: "ultrafast" });
if (settings.kind !== "local") throw new Error("not a local provider entry");
const provider = new LocalProvider(settings, { ffmpegPath: process.env.FFMPEG_BIN ?? "ffmpeg", log: pino({ level: "silent" }) });
const task = { taskId: 1, job: { ...sampleJob, width: 320, height: 180, durationSeconds: 1 }, clientReference: "reelay-task-1", signal: new AbortController().signal };

const held: number[] = [];
for (;;) {
  try {
    held.push(openSync("/dev/null", "r"));
  } catch {
    break;
  }
}
const { providerTaskId } = await provider.submit(task);
const accepted = { ...task, providerTaskId };
const whileShort = new Set<string>();
for (let i = 0; i < 15; i++) {
  await sleep(100);
  whileShort.add((await provider.status(accepted)).state);
}
for (const fd of held) closeSync(fd);

let last: ProviderStatus = await provider.status(accepted);
for (let i = 0; i < 300 && (last.state === "queued" || last.state === "running"); i++) {
  await sleep(100);
  last = await provider.status(accepted);
}
await provider.close();
process.stdout.write(JSON.stringify({ held: held.length, whileShort: [...whileShort], last }));
