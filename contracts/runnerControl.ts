import { z } from "zod";

/**
 * Core NATS subjects between the edge and the runners (nothing here is stored: a lost message only means a
 * task is polled on schedule).
 */
export const RUNNER_SUBJECTS = {
  /** An upstream called back about a task: the runner hosting it asks the upstream now. */
  upstreamNews: "reelay.runners.upstream-news",
} as const;

/** An upstream's callback in our words: which channel, which of its tasks. Never trusted beyond "ask now". */
export const UpstreamNews = z.object({ channel: z.string().min(1).max(200), providerTaskId: z.string().min(1).max(200) });
export type UpstreamNews = z.infer<typeof UpstreamNews>;

/** One channel as the whole fleet uses it, read from the shared state (bucket `fleet`, contracts/fleet.ts). */
export const ChannelReport = z.object({
  channel: z.string(),
  kind: z.string(),
  state: z.enum(["in rotation", "cooling down"]),
  /** Tasks holding a slot on the channel, across every runner. */
  inFlight: z.number().int().nonnegative(),
  maxInFlight: z.number().int().positive(),
  inFlightByAccount: z.record(z.string(), z.number().int().nonnegative()),
  /** Tasks waiting for a slot on the channel, across every runner (a task of several channels counts on each). */
  waiting: z.number().int().nonnegative(),
  waitingByAccount: z.record(z.string(), z.number().int().nonnegative()),
  /** The configured limit (0: none) and the submits of the last 10 s, per second. */
  submitsPerSecond: z.number().nonnegative(),
  submitRate: z.number().nonnegative(),
  /** ISO time the channel comes back, and why it left, while cooling down. */
  backAt: z.string().optional(),
  coolDownReason: z.string().optional(),
  recentErrors: z.array(z.object({ at: z.string(), message: z.string() })),
  /**
   * Clean-ups after a task that failed (deleting the upstream's copy once ours is stored: `deleteAfterCopy`):
   * how many, and the last one's reason. Absent while none has failed.
   */
  cleanupFailures: z.object({ count: z.number().int().positive(), last: z.object({ at: z.string(), message: z.string() }) }).optional(),
});
export type ChannelReport = z.infer<typeof ChannelReport>;

/** Where an upstream calls back about a channel's tasks (`publicCallbackUrl` + this path). */
export const upstreamCallbackPath = (channel: string): string => `/hooks/upstream/${encodeURIComponent(channel)}`;
