import { z } from "zod";

/**
 * Core NATS subjects between the edge, the CLI and the runners (nothing here is stored: a lost message
 * only means a task is polled on schedule, or a report is missing one runner).
 */
export const RUNNER_SUBJECTS = {
  /** Every runner answers with its channels' state (`reelay channels`). */
  channels: "reelay.runners.channels",
  /** An upstream called back about a task: the runner hosting it asks the upstream now. */
  upstreamNews: "reelay.runners.upstream-news",
} as const;

/** An upstream's callback in our words: which channel, which of its tasks. Never trusted beyond "ask now". */
export const UpstreamNews = z.object({ channel: z.string().min(1).max(200), providerTaskId: z.string().min(1).max(200) });
export type UpstreamNews = z.infer<typeof UpstreamNews>;

export const ChannelReport = z.object({
  channel: z.string(),
  kind: z.string(),
  state: z.enum(["in rotation", "cooling down"]),
  inFlight: z.number().int().nonnegative(),
  maxInFlight: z.number().int().positive(),
  /** Tasks hosted by the runner waiting for a slot on any channel (the same for every row of one runner). */
  waiting: z.number().int().nonnegative(),
  /** ISO time the channel comes back, while cooling down. */
  backAt: z.string().optional(),
  recentErrors: z.array(z.object({ at: z.string(), message: z.string() })),
  /**
   * Clean-ups after a task that failed (deleting the upstream's copy once ours is stored: `deleteAfterCopy`):
   * how many, and the last one's reason. Absent while none has failed.
   */
  cleanupFailures: z.object({ count: z.number().int().positive(), last: z.object({ at: z.string(), message: z.string() }) }).optional(),
});
export type ChannelReport = z.infer<typeof ChannelReport>;

/** One runner's answer to RUNNER_SUBJECTS.channels. */
export const RunnerChannels = z.object({ runner: z.string(), channels: z.array(ChannelReport) });
export type RunnerChannels = z.infer<typeof RunnerChannels>;

/** Where an upstream calls back about a channel's tasks (`publicCallbackUrl` + this path). */
export const upstreamCallbackPath = (channel: string): string => `/hooks/upstream/${encodeURIComponent(channel)}`;
