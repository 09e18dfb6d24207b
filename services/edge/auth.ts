import type { KV } from "@nats-io/kv";
import { ApiKeyRecord } from "../../contracts/apiKey.ts";
import { ApiKeyStore, hashApiKey } from "../shared/apiKeys.ts";
import { AuthError } from "../shared/errors.ts";
import { KvMirror } from "../shared/kvMirror.ts";
import type { Logger } from "../shared/log.ts";
import type { RateLimiter } from "./rateLimiter.ts";

const BEARER = /^Bearer\s+(\S+)\s*$/i;
const HASH_CACHE_LIMIT = 10_000;

/**
 * Resolves `Authorization: Bearer <key>` to its account. Keys live hashed in the api_keys bucket;
 * a watch mirrors them in memory so a request costs one hash, and revocations apply within moments.
 * A key the mirror does not know yet (just created elsewhere) is looked up in the bucket. A known key
 * is then held to its request rate, when a limiter is given.
 */
export class ApiKeyDirectory {
  private readonly byHash = new Map<string, ApiKeyRecord>();
  readonly mirror: KvMirror<ApiKeyRecord>;
  /** Presented key → its hash: hashing is the largest cost of an authenticated request. Bounded. */
  private readonly hashes = new Map<string, string>();
  private readonly store: ApiKeyStore;

  constructor(bucket: KV, log: Logger, private readonly limiter?: RateLimiter) {
    this.store = new ApiKeyStore(bucket);
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

  authenticate(authorization: string): ApiKeyRecord | Promise<ApiKeyRecord> {
    const key = BEARER.exec(authorization)?.[1];
    if (!key) throw new AuthError("missing API key: send Authorization: Bearer <API_KEY>");
    let hash = this.hashes.get(key);
    if (hash === undefined) {
      if (this.hashes.size >= HASH_CACHE_LIMIT) this.hashes.clear();
      hash = hashApiKey(key);
      this.hashes.set(key, hash);
    }
    const known = this.byHash.get(hash);
    if (known) return this.admit(known);
    return this.store.lookup(hash).then((record) => {
      if (!record) throw new AuthError("invalid API key");
      return this.admit(record);
    });
  }

  /** Runs `then` with the caller's key record: synchronously when the key is already known (the usual case). */
  withAccount<T>(authorization: string, then: (key: ApiKeyRecord) => T | Promise<T>): T | Promise<T> {
    const key = this.authenticate(authorization);
    return key instanceof Promise ? key.then(then) : then(key);
  }

  /** A valid key within its request rate passes; over it, 429. */
  private admit(record: ApiKeyRecord): ApiKeyRecord {
    this.limiter?.take(record.keyId);
    return record;
  }
}
