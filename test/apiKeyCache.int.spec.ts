import { createHash } from "node:crypto";
import type { KV } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import { ApiKeyDirectory, DEFAULT_KEY_CACHE_BOUNDS, redactApiKey } from "../services/edge/auth.ts";
import { API_KEY_PREFIX, ApiKeyStore } from "../services/shared/apiKeys.ts";
import { InvalidApiKeyError, ServiceUnavailableError } from "../services/shared/errors.ts";
import { silentLog } from "./helpers/testApp.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

/** The api_keys bucket with its gets counted: a refused key asked again must not cost another lookup. */
function countingGets(bucket: KV): { bucket: KV; gets: () => number } {
  let gets = 0;
  const counted = new Proxy(bucket, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== "get" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
      return (...args: unknown[]) => {
        gets += 1;
        return Reflect.apply(value, target, args);
      };
    },
  });
  return { bucket: counted, gets: () => gets };
}

const authenticate = async (directory: ApiKeyDirectory, key: string) => directory.authenticate(`Bearer ${key}`);

describe("the API-key directory's caches", () => {
  const suite = natsPerSuite("api-key-cache-test", 2000);

  it("keeps a thousand distinct unknown keys within its bounds, and looks a refused key up once", async () => {
    const { bucket, gets } = countingGets(suite.nats.apiKeys);
    const directory = new ApiKeyDirectory(bucket, silentLog, undefined, { validKeys: 50, refusedKeys: 200, refusedTtlMs: 60_000, unknownKeyLookups: { perSecond: 100_000, burst: 1000 } });
    await directory.start();
    try {
      // Shaped like reelay's keys, so each is looked up once.
      const unknown = (i: number) => `${API_KEY_PREFIX}${createHash("sha256").update(String(i)).digest("base64url").slice(0, 32)}`;
      for (let i = 0; i < 1000; i++) await expect(authenticate(directory, unknown(i))).rejects.toBeInstanceOf(InvalidApiKeyError);
      expect(gets()).toBe(1000);
      expect(directory.cacheSizes()).toEqual({ validKeys: 0, refusedKeys: 200 });

      await expect(authenticate(directory, unknown(999))).rejects.toBeInstanceOf(InvalidApiKeyError);
      expect(gets()).toBe(1000);
    } finally {
      directory.stop();
    }
  });

  it("made-up keys cost at most the lookup budget: past it 503 without a lookup; a key made meanwhile works as soon as the mirror has it", async () => {
    const { bucket, gets } = countingGets(suite.nats.apiKeys);
    const directory = new ApiKeyDirectory(bucket, silentLog, undefined, { ...DEFAULT_KEY_CACHE_BOUNDS, unknownKeyLookups: { perSecond: 0.001, burst: 5 } });
    await directory.start();
    try {
      const madeUp = (i: number) => `${API_KEY_PREFIX}${createHash("sha256").update(`made-up ${i}`).digest("base64url").slice(0, 32)}`;
      const outcomes = await Promise.all(Array.from({ length: 50 }, (_, i) => authenticate(directory, madeUp(i)).then(() => "valid", (error: unknown) => (error as Error).constructor.name)));
      expect(outcomes.filter((outcome) => outcome === InvalidApiKeyError.name)).toHaveLength(5);
      expect(outcomes.filter((outcome) => outcome === ServiceUnavailableError.name)).toHaveLength(45);
      expect(gets()).toBe(5);
      const { key } = await new ApiKeyStore(suite.nats.apiKeys).create("made-meanwhile");
      await expect.poll(() => authenticate(directory, key).then((record) => record.account, () => "refused")).toBe("made-meanwhile");
      expect(gets()).toBe(5);
    } finally {
      directory.stop();
    }
  });

  it("refuses what no key of reelay's looks like (another provider's key, 10 KiB of garbage, a key cut short) without a lookup or a cache entry (each was a NATS request)", async () => {
    const { bucket, gets } = countingGets(suite.nats.apiKeys);
    const directory = new ApiKeyDirectory(bucket, silentLog);
    await directory.start();
    try {
      const { key } = await new ApiKeyStore(suite.nats.apiKeys).create("shaped");
      const notOurs = [`sk-proj-${"a".repeat(48)}`, `${"x".repeat(10 * 1024)}-1`, key.slice(0, -1), `${key}x`, key.replace(API_KEY_PREFIX, "rla_"), `${API_KEY_PREFIX}${"*".repeat(32)}`];
      for (const presented of notOurs) await expect(authenticate(directory, presented)).rejects.toBeInstanceOf(InvalidApiKeyError);
      expect(gets()).toBe(0);
      expect(directory.cacheSizes()).toEqual({ validKeys: 0, refusedKeys: 0 });
      // The key itself works (from the mirror, or looked up).
      expect((await authenticate(directory, key)).account).toBe("shaped");
    } finally {
      directory.stop();
    }
  });

  it("remembers valid keys up to its bound, and a revoked key stops working", async () => {
    const store = new ApiKeyStore(suite.nats.apiKeys);
    const directory = new ApiKeyDirectory(suite.nats.apiKeys, silentLog, undefined, { ...DEFAULT_KEY_CACHE_BOUNDS, validKeys: 3, refusedKeys: 10 });
    await directory.start();
    try {
      const keys = await Promise.all(Array.from({ length: 5 }, () => store.create("cached")));
      for (const { key } of keys) expect((await authenticate(directory, key)).account).toBe("cached");
      expect(directory.cacheSizes().validKeys).toBe(3);

      const [first] = keys;
      if (!first) throw new Error("no key");
      await store.revoke(first.keyId);
      await expect.poll(() => authenticate(directory, first.key).then(() => "accepted", (error: unknown) => error), { timeout: 5000 }).toBeInstanceOf(
        InvalidApiKeyError,
      );
      // A key created after a refusal of something else is accepted at once.
      const fresh = await store.create("cached");
      expect((await authenticate(directory, fresh.key)).account).toBe("cached");
    } finally {
      directory.stop();
    }
  });

  it("redacts a refused key the way OpenAI shows it", () => {
    expect(redactApiKey("rly_abcdefghijklmnopqrstuvwxyz012345")).toBe(`rly${"*".repeat(29)}2345`);
    expect(redactApiKey("short")).toBe("*****");
    expect(redactApiKey("y".repeat(100_000))).toHaveLength(3 + 40 + 4);
  });
});
