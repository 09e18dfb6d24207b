import type { VideoJobSpec } from "../../../contracts/videoTask.ts";
import type { ProviderStatus } from "../../../contracts/videoResult.ts";
import type { ProviderPolicy } from "../policy/providerPolicy.ts";

/** A task as a provider sees it. `signal` ends the call: the deadline, a runner stepping aside, shutdown. */
export interface ProviderTask {
  taskId: number;
  job: VideoJobSpec;
  /** Stable per task (`reelay-task-<id>`): sent where the upstream keeps one, so a lost answer can be found again. */
  clientReference: string;
  signal: AbortSignal;
}

export type AcceptedTask = ProviderTask & { providerTaskId: string };

export type { ProviderStatus, VideoResult } from "../../../contracts/videoResult.ts";

/**
 * One upstream video generator behind one port. Adapters only translate; the runner owns policy for all
 * of them (deadline, retries, polling schedule, limits, cancel, copying results, usage fallback).
 * Every method may be called again for the same task after a crash.
 */
export interface VideoProvider {
  readonly policy: ProviderPolicy;
  submit(task: ProviderTask): Promise<{ providerTaskId: string }>;
  status(task: AcceptedTask): Promise<ProviderStatus>;
  /** Asks the upstream to stop (best effort): on timeout, or when this runner steps aside. */
  cancel?(task: AcceptedTask): Promise<void>;
  /** The upstream's id for a task submitted with this client reference, if the upstream can tell. */
  findByClientReference?(task: ProviderTask): Promise<string | undefined>;
  /**
   * Starts an accepted task again that the upstream answered `UpstreamLost` for (a local render whose process
   * ended): only when the task's log says it is still live here (the live task machine reads it first).
   */
  restart?(task: AcceptedTask): Promise<void>;
  /** The runner is done with the task: free whatever is kept for it (rendered files, memory). */
  forget?(task: AcceptedTask): Promise<void>;
  close(): Promise<void>;
}

/** The upstream refused the task for good (bad input, policy): the task fails, create answers 400. */
export class ProviderRejected extends Error {}

/** The upstream cannot take the call now (429, 5xx, timeout, network): retried with back-off until the deadline. */
export class ProviderUnavailable extends Error {
  constructor(
    message: string,
    /** The upstream's Retry-After, when it said one. */
    readonly retryAfterMs?: number,
    /**
     * The upstream answered with an error: a submit it refused so created nothing, and the task may go to
     * another channel without asking this one first. False when no answer came (a timeout, a dropped
     * connection) or an answer could not be read: then the upstream may have the task.
     */
    readonly refused = false,
  ) {
    super(message);
  }
}

/** Our side is wrong (no key, a key the upstream refuses, an unknown model id): the task fails, the operator is told. */
export class ProviderMisconfigured extends Error {}

/**
 * The upstream has no record of an accepted task (the local provider after its process ended): the live task's
 * machine decides what follows (services/runner/liveTask.ts), the adapter starts nothing on its own.
 */
export class UpstreamLost extends Error {}
