import type { UpstreamUsage, VideoJobSpec } from "../../../contracts/videoTask.ts";
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

/** Where a finished video is: the runner copies it into the object store (resultCopy.ts). */
export type VideoResult =
  /** An upstream address, usually expiring: fetched with the reference guard, streamed, size-capped. */
  | {
      kind: "url";
      url: string;
      /** Sent with the request to the address's own origin only (an upstream key must not follow a redirect to a CDN). */
      headers?: Record<string, string>;
    }
  /** A file this process rendered; the provider removes it when the runner calls `forget`. */
  | { kind: "file"; path: string };

/** What an upstream says about a task, in our words. */
export type ProviderStatus =
  | { state: "queued" }
  /** `progress`: 0–100, where the upstream reports it. */
  | { state: "running"; progress?: number }
  | {
      state: "succeeded";
      result: VideoResult;
      /** What the upstream reports; the runner falls back to the request and design.md's estimate. */
      durationSeconds?: number;
      resolution?: string;
      usageTokens?: number;
      /** What the upstream bills us for it, in its own unit (recorded for `reelay audit upstream`). */
      upstreamUsage?: UpstreamUsage;
    }
  /** `reason` is shown to the customer; `detail` only to operators (log and the failed event). */
  | { state: "failed"; reason: string; detail?: string };

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
