import { lruOf } from "../shared/lruOf.ts";

/**
 * Callback endpoints (a URL's origin) that keep failing are paused: after `pauseAfterFailures` failures in a
 * row no attempt goes to the endpoint for `pauseMs`, then one delivery tries it again (another failure pauses
 * it again at once; a success clears it). A dead receiver then costs a few attempts per pause instead of one
 * per job and back-off step. Kept per dispatcher, in memory: a restarted dispatcher tries each endpoint anew.
 */
export class EndpointPauses {
  private readonly failures = lruOf<string, { inARow: number; pausedUntil: number }>(100_000);

  constructor(private readonly policy: { pauseAfterFailures: number; pauseMs: number }) {}

  /** How long the endpoint of `url` stays paused (0: not paused). */
  pausedFor(url: string, now = Date.now()): number {
    return Math.max(0, (this.failures.get(originOf(url))?.pausedUntil ?? 0) - now);
  }

  delivered(url: string): void {
    this.failures.delete(originOf(url));
  }

  failed(url: string, now = Date.now()): void {
    const origin = originOf(url);
    const inARow = (this.failures.get(origin)?.inARow ?? 0) + 1;
    this.failures.set(origin, { inARow, pausedUntil: inARow >= this.policy.pauseAfterFailures ? now + this.policy.pauseMs : 0 });
  }
}

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}
