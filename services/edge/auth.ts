import type { KV } from "@nats-io/kv";
import { ApiKeyRecord } from "../../contracts/apiKey.ts";
import { ApiKeyStore, hashApiKey } from "../shared/apiKeys.ts";
import { AuthError } from "../shared/errors.ts";
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
  /** Presented key → its hash: hashing is the largest cost of an authenticated request. Bounded. */
  private readonly hashes = new Map<string, string>();
  private readonly store: ApiKeyStore;
  private stopWatching: (() => void) | undefined;

  constructor(private readonly bucket: KV, private readonly log: Logger, private readonly limiter?: RateLimiter) {
    this.store = new ApiKeyStore(bucket);
  }

  async start(): Promise<void> {
    const watch = await this.bucket.watch({ key: "hash.>" });
    this.stopWatching = () => watch.stop();
    (async () => {
      for await (const entry of watch) {
        const hash = entry.key.slice("hash.".length);
        if (entry.operation !== "PUT") this.byHash.delete(hash);
        else this.byHash.set(hash, ApiKeyRecord.parse(entry.json()));
      }
    })().catch((error: unknown) => this.log.error({ err: error }, "api key watch ended"));
  }

  stop(): void {
    this.stopWatching?.();
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
