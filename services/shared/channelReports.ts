import { RUNNER_SUBJECTS, RunnerChannels } from "../../contracts/runnerControl.ts";
import type { Nats } from "./nats.ts";

/** How long runners get to answer: they reply from memory, so a live one answers in milliseconds. */
const ANSWER_WINDOW_MS = 1000;

/** Every running runner's channel reports, gathered over core NATS (`reelay channels`, the admin API). */
export async function gatherChannels(nats: Nats): Promise<RunnerChannels[]> {
  const answers: RunnerChannels[] = [];
  for await (const msg of await nats.nc.requestMany(RUNNER_SUBJECTS.channels, "", { strategy: "timer", maxWait: ANSWER_WINDOW_MS })) {
    const parsed = RunnerChannels.safeParse(JSON.parse(msg.string()));
    if (parsed.success) answers.push(parsed.data);
  }
  return answers.sort((a, b) => a.runner.localeCompare(b.runner));
}
