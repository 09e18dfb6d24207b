import { lruOf } from "../shared/lruOf.ts";
import { fleetKeys, RateRecord } from "../../contracts/fleet.ts";
import { ConcurrencyError, RateLimitedError } from "../shared/errors.ts";
import type { FleetStore } from "../shared/fleetStore.ts";
import type { Logger } from "../shared/log.ts";

const MAX_TRACKED_KEYS = 100_000;
/**
 * An edge takes what a key may spend in this long from the shared budget at once (at least one request), or in
 * two of its recent round trips to NATS if longer: one refill per key is in flight at a time, so a share must
 * last until the next one can arrive or a slow NATS would hold the key below its rate.
 */
const SHARE_MS = 50;
/** Tokens an edge took and did not spend within this long are dropped (spent for nothing): the bound never grows, and a starved event loop still spends its share. */
const HOLD_MS = 1_000;
/** Races lost in a row before a request is refused rather than kept waiting (each lost race: another edge took tokens). */
const MAX_RACES = 8;

/** Requests per API key as a token bucket: up to `burst` at once, then `perSecond` on average. */
export interface KeyRateLimit {
  /** Passes (at once, or once the budget is read) or throws RateLimitedError. */
  take(keyId: string): void | Promise<void>;
}

const refused = (perSecond: number, burst: number) => new RateLimitedError(`rate limit exceeded: at most ${perSecond} requests per second per API key (bursts of ${burst})`);

/** Tokens in a bucket that had `tokens` at `at`, refilled at `perSecond` up to `burst`, at `now`. Pure. */
export const refilled = (bucket: RateRecord | undefined, now: number, perSecond: number, burst: number): number =>
  bucket === undefined ? burst : Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.at) / 1000) * perSecond);

/** The bucket after one token is taken from it at `now`, or undefined when it has none. Pure. */
const afterTaking = (bucket: RateRecord | undefined, now: number, perSecond: number, burst: number): RateRecord | undefined => {
  const tokens = refilled(bucket, now, perSecond, burst);
  return tokens < 1 ? undefined : { tokens: tokens - 1, at: now };
};

/** One token bucket in this process's memory: a token while there is one (up to `burst` at once, then `perSecond` on average). */
export class LocalBudget {
  private bucket: RateRecord | undefined;

  constructor(private readonly perSecond: number, private readonly burst: number, private readonly now: () => number = Date.now) {}

  take(): boolean {
    const next = afterTaking(this.bucket, this.now(), this.perSecond, this.burst);
    if (next === undefined) return false;
    this.bucket = next;
    return true;
  }
}

/** One process's token buckets, in memory: what an edge falls back to while NATS is out of reach. */
export class RateLimiter implements KeyRateLimit {
  private readonly buckets = lruOf<string, RateRecord>(MAX_TRACKED_KEYS);

  constructor(private readonly perSecond: number, private readonly burst: number, private readonly now: () => number = Date.now) {}

  take(keyId: string): void {
    if (this.perSecond <= 0) return;
    const next = afterTaking(this.buckets.get(keyId), this.now(), this.perSecond, this.burst);
    if (next === undefined) throw refused(this.perSecond, this.burst);
    this.buckets.set(keyId, next);
  }
}

/**
 * The fleet's token bucket per API key, shared by every edge (bucket `fleet`, `rate.<keyId>`): an edge takes a
 * small share (what the key may spend in 50 ms, at least one request) with a write guarded by the bucket's last
 * revision, and spends it locally; a share not spent within a second is dropped. So across any number of edges a
 * key never gets more than `burst` + `perSecond` × t requests in t; a request that finds its edge's share empty
 * costs one guarded write (two messages). A bucket that looks empty by the last record this edge saw is empty
 * (the newer records only hold fewer tokens): refused without asking NATS. When NATS cannot be reached, each
 * edge limits on its own meanwhile (`fallback`).
 */
export class FleetRateLimiter implements KeyRateLimit {
  private readonly shares = lruOf<string, { tokens: number; until: number }>(MAX_TRACKED_KEYS);
  private readonly seen = lruOf<string, { revision: number; bucket: RateRecord | undefined }>(MAX_TRACKED_KEYS);
  /** One refill at a time per key: requests that arrive meanwhile wait for it and spend from its share. */
  private readonly refilling = new Map<string, Promise<void>>();
  private readonly fallback: RateLimiter;
  private lastWarning = 0;
  /** A moving average of this edge's guarded writes' round trips (ms). */
  private roundTripMs = 0;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly store: FleetStore,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.fallback = new RateLimiter(perSecond, burst, now);
  }

  take(keyId: string): void | Promise<void> {
    if (this.perSecond <= 0 || this.spend(keyId)) return;
    return this.refill(keyId).then(() => {
      if (!this.spend(keyId)) throw refused(this.perSecond, this.burst);
    });
  }

  private spend(keyId: string): boolean {
    const share = this.shares.get(keyId);
    if (!share || share.tokens < 1 || share.until <= this.now()) return false;
    share.tokens--;
    return true;
  }

  private refill(keyId: string): Promise<void> {
    const running = this.refilling.get(keyId);
    if (running) return running;
    const refill = this.takeShare(keyId).finally(() => this.refilling.delete(keyId));
    this.refilling.set(keyId, refill);
    return refill;
  }

  private async takeShare(keyId: string): Promise<void> {
    const key = fleetKeys.rate(keyId);
    const share = Math.max(1, Math.floor((this.perSecond * Math.max(SHARE_MS, 2 * this.roundTripMs)) / 1000));
    // A full bucket refills in burst / perSecond: a record older than that says nothing, and goes.
    const ttlMs = (this.burst / this.perSecond) * 1000 + 1000;
    try {
      let seen = this.seen.get(keyId) ?? (await this.read(keyId));
      for (let races = 0; races < MAX_RACES; races++) {
        const now = this.now();
        const tokens = refilled(seen.bucket, now, this.perSecond, this.burst);
        if (tokens < 1) return;
        const taking = Math.min(share, Math.floor(tokens));
        const bucket = { tokens: tokens - taking, at: now };
        try {
          const sent = performance.now();
          const revision = await this.store.write(key, bucket, { ttlMs, expect: seen.revision });
          this.roundTripMs = 0.8 * this.roundTripMs + 0.2 * (performance.now() - sent);
          this.seen.set(keyId, { revision, bucket });
          this.shares.set(keyId, { tokens: taking, until: now + HOLD_MS });
          return;
        } catch (error) {
          if (!(error instanceof ConcurrencyError)) throw error;
          seen = await this.read(keyId);
        }
      }
    } catch (error) {
      if (error instanceof ConcurrencyError) throw error;
      this.warn(error);
      // NATS is out of reach: this edge's own bucket decides meanwhile, one request at a time.
      this.fallback.take(keyId);
      this.shares.set(keyId, { tokens: 1, until: this.now() + HOLD_MS });
    }
  }

  private async read(keyId: string): Promise<{ revision: number; bucket: RateRecord | undefined }> {
    const { revision, value } = await this.store.read(fleetKeys.rate(keyId));
    const parsed = RateRecord.safeParse(value);
    const seen = { revision, bucket: parsed.success ? parsed.data : undefined };
    this.seen.set(keyId, seen);
    return seen;
  }

  private warn(error: unknown): void {
    const now = this.now();
    if (now - this.lastWarning < 10_000) return;
    this.lastWarning = now;
    this.log.warn({ err: error }, "the fleet's rate limits are out of reach: each edge limits API keys on its own until NATS answers");
  }
}
