import type { UpstreamUsage } from "./videoTask.ts";

/**
 * What a video upstream says about an accepted task, in reelay's words: the provider port's answer
 * (services/runner/providers/types.ts) and what the live task's machine (machines/liveTask.ts) decides on.
 */

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

