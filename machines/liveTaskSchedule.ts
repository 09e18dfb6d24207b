/** The part of a provider's policy (services/runner/policy/providerPolicy.ts) that sets a live task's schedule. */
export interface PollPolicy {
  pollFirstAfterMs: number;
  pollEveryMs: number;
  pollMaxEveryMs: number;
}

/**
 * When to ask an upstream for news: first `pollFirstAfterMs` after acceptance (vendors take tens of
 * seconds; asking sooner only costs calls), then every `pollEveryMs`, growing by half each time up to
 * `pollMaxEveryMs`. Pure, so a restored task derives its schedule again from the count of calls.
 */
export function pollDelay(policy: PollPolicy, pollsSoFar: number): number {
  if (pollsSoFar === 0) return policy.pollFirstAfterMs;
  return Math.min(policy.pollMaxEveryMs, Math.round(policy.pollEveryMs * 1.5 ** (pollsSoFar - 1)));
}

/**
 * Pause before retrying a call that failed for a passing reason: 0.5 s doubling to 30 s, half of it
 * random so runners don't retry in step, never less than the upstream's Retry-After.
 */
export function retryDelay(attempt: number, retryAfterMs?: number, random: () => number = Math.random): number {
  const ceiling = Math.min(30_000, 500 * 2 ** Math.min(attempt, 6));
  const jittered = ceiling / 2 + random() * (ceiling / 2);
  return Math.max(jittered, retryAfterMs ?? 0);
}
