import type { VideoJobSpec } from "../../../contracts/videoTask.ts";
import type { ProviderReport } from "../../../machines/videoTask.ts";

export interface ProviderTask {
  taskId: number;
  job: VideoJobSpec;
}

/**
 * One upstream video generator, in our words. Restored tasks re-invoke these, so both must be safe to
 * call again for the same task: submit may be repeated after a crash, poll any number of times.
 */
export interface VideoProvider {
  readonly pollIntervalMs: number;
  submit(task: ProviderTask): Promise<{ providerTaskId: string }>;
  poll(task: ProviderTask & { providerTaskId: string }): Promise<ProviderReport>;
  close(): Promise<void>;
}

/** The upstream refused the task for good (bad input, policy): the task fails and create answers 400. */
export class ProviderRejection extends Error {}
