import type { KV } from "@nats-io/kv";
import type { LRUCache } from "lru-cache";
import { lruOf } from "../shared/lruOf.ts";
import { ApiKeyRecord } from "../../contracts/apiKey.ts";
import { API_KEY_PREFIX, API_KEY_SHAPE, ApiKeyStore, hashApiKey } from "../shared/apiKeys.ts";
import { ADMIN_TOKEN_PREFIX } from "../shared/adminTokens.ts";
import { InvalidApiKeyError, MissingApiKeyError, ServiceUnavailableError } from "../shared/errors.ts";
import { KvMirror } from "../shared/kvMirror.ts";
import type { Logger } from "../shared/log.ts";
import { LocalBudget, type KeyRateLimit } from "./rateLimiter.ts";

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** How much a directory remembers; every cache is bounded, none grows with what clients choose to send. */
export interface KeyCacheBounds {
  /** Valid keys whose hash is remembered (hashing is the largest cost of an authenticated request). */
  validKeys: number;
  /** Hashes of refused keys, so a client repeating a bad key costs no bucket lookup. */
  refusedKeys: number;
  /** How long a refusal is remembered. A key created meanwhile is still accepted: the mirror is asked first. */
  refusedTtlMs: number;
  /**
   * Lookups in the bucket of keys the mirror does not know, per second and in a burst, all keys together. The
   * mirror holds every key, so only a key made on another edge a moment ago needs one, and one that was never
   * made: without a bound, each distinct made-up key cost nats-server a read, which every edge and runner
   * shares (85-88 µs of its CPU per request under `bench/tools/hostileClients.ts unknown-keys`; 18-22 with it).
   */
  unknownKeyLookups: { perSecond: number; burst: number };
}

export const DEFAULT_KEY_CACHE_BOUNDS: KeyCacheBounds = { validKeys: 10_000, refusedKeys: 10_000, refusedTtlMs: 60_000, unknownKeyLookups: { perSecond: 200, burst: 400 } };

/** How OpenAI shows a key it refuses: the first 3 and last 4 characters, the rest masked (at most 40 stars). */
export function redactApiKey(key: string): string {
  if (key.length < 12) return "*".repeat(Math.min(key.length, 8));
  return `${key.slice(0, 3)}${"*".repeat(Math.min(key.length - 7, 40))}${key.slice(-4)}`;
}

/** A key this API does not know; an admin token sent here is told where it belongs (whether or not it is valid). */
function refusedKey(key: string): InvalidApiKeyError {
  const hint = key.startsWith(ADMIN_TOKEN_PREFIX)
    ? `This is an admin token (${ADMIN_TOKEN_PREFIX}…): it opens the admin API and console on their own port, not this API, which takes an API key (${API_KEY_PREFIX}…).`
    : undefined;
  return new InvalidApiKeyError(redactApiKey(key), hint);
}

/**
 * Resolves `Authorization: Bearer <key>` to its account. Keys live hashed in the api_keys bucket;
 * a watch mirrors them in memory so a request costs one hash, and revocations apply within moments.
 * A key the mirror does not know yet (just created elsewhere) is looked up in the bucket. A known key
 * is then held to its request rate, when a limiter is given.
 */
export class ApiKeyDirectory {
  private readonly byHash = new Map<string, ApiKeyRecord>();
  readonly mirror: KvMirror<ApiKeyRecord>;
  /**
   * Presented key → its hash, for keys that were valid when presented. Only those: caching every
   * presented string let a client without any key fill memory with garbage (issue 8).
   */
  private readonly hashes: LRUCache<string, string>;
  /** Hashes of refused keys: fixed-size entries whatever the length of what was presented. */
  private readonly refused: LRUCache<string, true>;
  private readonly store: ApiKeyStore;
  private readonly lookups: LocalBudget;

  constructor(bucket: KV, log: Logger, private readonly limiter?: KeyRateLimit, bounds: KeyCacheBounds = DEFAULT_KEY_CACHE_BOUNDS) {
    this.lookups = new LocalBudget(bounds.unknownKeyLookups.perSecond, bounds.unknownKeyLookups.burst);
    this.store = new ApiKeyStore(bucket);
    this.hashes = lruOf(bounds.validKeys);
    this.refused = lruOf(bounds.refusedKeys, { ttl: bounds.refusedTtlMs });
    const hashOf = (key: string) => key.slice("hash.".length);
    this.mirror = new KvMirror(bucket, {
      name: "api keys",
      key: "hash.>",
      decode: (entry) => ApiKeyRecord.parse(entry.json()),
      onPut: (key, record) => this.byHash.set(hashOf(key), record),
      onDelete: (key) => this.byHash.delete(hashOf(key)),
      log,
    });
  }

  start(): Promise<void> {
    return this.mirror.start();
  }

  stop(): void {
    this.mirror.stop();
  }

  /** How many entries the caches hold now (for tests and diagnostics). */
  cacheSizes(): { validKeys: number; refusedKeys: number } {
    return { validKeys: this.hashes.size, refusedKeys: this.refused.size };
  }

  /** The key's record, held to its request rate (429 past it); 401 for a missing or unknown key. */
  authenticate(authorization: string): ApiKeyRecord | Promise<ApiKeyRecord> {
    const known = this.identify(authorization);
    return known instanceof Promise ? known.then((record) => this.admit(record)) : this.admit(known);
  }

  /** The key's record, not yet counted against its rate (the body gate asks before the handler authenticates); 401 for a missing or unknown key. */
  identify(authorization: string): ApiKeyRecord | Promise<ApiKeyRecord> {
    const key = BEARER.exec(authorization)?.[1];
    if (!key) throw new MissingApiKeyError();
    // No key of ours (another provider's, say, or garbage): refused without a hash, a cache entry or a bucket
    // lookup, which each such request cost before (one NATS request per distinct string a client sent).
    if (!API_KEY_SHAPE.test(key)) throw refusedKey(key);
    const cached = this.hashes.get(key);
    const hash = cached ?? hashApiKey(key);
    const known = this.byHash.get(hash);
    if (known) {
      if (cached === undefined) this.hashes.set(key, hash);
      return known;
    }
    if (this.refused.has(hash)) throw refusedKey(key);
    // Past the budget the caller tries again shortly, by when the mirror has any key that was just made.
    if (!this.lookups.take()) throw new ServiceUnavailableError("this edge is being asked about too many API keys it does not know; try again shortly", 1);
    return this.store.lookup(hash).then((record) => {
      if (record) {
        this.hashes.set(key, hash);
        return record;
      }
      this.refused.set(hash, true);
      throw refusedKey(key);
    });
  }

  /** Runs `then` with the caller's key record: synchronously when the key is already known (the usual case). */
  withAccount<T>(authorization: string, then: (key: ApiKeyRecord) => T | Promise<T>): T | Promise<T> {
    const key = this.authenticate(authorization);
    return key instanceof Promise ? key.then(then) : then(key);
  }

  /** A valid key within its request rate passes (at once while its edge holds a share of the key's budget); over it, 429. */
  private admit(record: ApiKeyRecord): ApiKeyRecord | Promise<ApiKeyRecord> {
    const taken = this.limiter?.take(record.keyId);
    return taken ? taken.then(() => record) : record;
  }
}
