import { RateLimitedError } from "../shared/errors.ts";

interface Bucket {
  tokens: number;
  refilledAt: number;
}

const MAX_TRACKED_KEYS = 100_000;

/**
 * Requests per second per API key, as a token bucket: up to `burst` at once, then `perSecond` on average.
 * Per edge process (N edges allow N times the rate): it protects each edge and the upstreams behind it
 * without a NATS round trip on every request. `perSecond` 0 turns it off.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly perSecond: number, private readonly burst: number, private readonly now: () => number = Date.now) {}

  take(keyId: string): void {
    if (this.perSecond <= 0) return;
    const now = this.now();
    const bucket = this.buckets.get(keyId) ?? { tokens: this.burst, refilledAt: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.refilledAt) / 1000) * this.perSecond);
    bucket.refilledAt = now;
    if (bucket.tokens < 1) {
      throw new RateLimitedError(`rate limit exceeded: at most ${this.perSecond} requests per second per API key (bursts of ${this.burst})`);
    }
    bucket.tokens -= 1;
    if (!this.buckets.has(keyId) && this.buckets.size >= MAX_TRACKED_KEYS) this.buckets.clear();
    this.buckets.set(keyId, bucket);
  }
}
