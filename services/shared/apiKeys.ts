import { createHash, randomBytes } from "node:crypto";
import type { KV } from "@nats-io/kv";
import { AccountName, ApiKeyIndexEntry, ApiKeyRecord } from "../../contracts/apiKey.ts";
import { NotFoundError, ValidationError } from "./errors.ts";

/** Customer API keys start so (admin tokens with `rla_`, adminTokens.ts): a key sent to the wrong API is recognised. */
export const API_KEY_PREFIX = "rly_";

/** Random bytes after the prefix: 24, so 32 base64url characters. */
const KEY_BYTES = 24;
/** Every key `create` makes has this shape; a presented string without it is no key of ours, whatever the bucket holds. */
export const API_KEY_SHAPE = new RegExp(`^${API_KEY_PREFIX}[A-Za-z0-9_-]{${(KEY_BYTES / 3) * 4}}$`);

export const hashApiKey = (key: string): string => createHash("sha256").update(key).digest("hex");

const json = (value: unknown) => JSON.stringify(value);

/** Creates, lists and revokes API keys in the `api_keys` bucket. Keys are shown once and stored only as hashes. */
export class ApiKeyStore {
  constructor(private readonly bucket: KV) {}

  async create(account: string): Promise<{ key: string; keyId: string }> {
    const parsedAccount = AccountName.safeParse(account);
    if (!parsedAccount.success) throw new ValidationError(parsedAccount.error.issues[0]?.message ?? "bad account name");
    const key = `${API_KEY_PREFIX}${randomBytes(KEY_BYTES).toString("base64url")}`;
    const keyId = randomBytes(6).toString("hex");
    const keyHash = hashApiKey(key);
    const record: ApiKeyRecord = { keyId, account, createdAt: new Date().toISOString() };
    // The index entry first: a key that exists can always be found and revoked.
    await this.bucket.create(`id.${keyId}`, json({ ...record, keyHash }));
    await this.bucket.create(`hash.${keyHash}`, json(record));
    return { key, keyId };
  }

  async list(account?: string): Promise<ApiKeyIndexEntry[]> {
    const entries: ApiKeyIndexEntry[] = [];
    for await (const name of await this.bucket.keys("id.*")) {
      const entry = await this.bucket.get(name);
      if (!entry || entry.operation !== "PUT") continue;
      const parsed = ApiKeyIndexEntry.parse(entry.json());
      if (account === undefined || parsed.account === account) entries.push(parsed);
    }
    return entries.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async revoke(keyId: string): Promise<ApiKeyIndexEntry> {
    const entry = /^[0-9a-f]{12}$/.test(keyId) ? await this.bucket.get(`id.${keyId}`) : null;
    if (!entry || entry.operation !== "PUT") throw new NotFoundError(`no API key with id ${keyId}`);
    const parsed = ApiKeyIndexEntry.parse(entry.json());
    await this.bucket.delete(`hash.${parsed.keyHash}`);
    await this.bucket.delete(`id.${keyId}`);
    return parsed;
  }

  async lookup(keyHash: string): Promise<ApiKeyRecord | undefined> {
    const entry = await this.bucket.get(`hash.${keyHash}`);
    return entry && entry.operation === "PUT" ? ApiKeyRecord.parse(entry.json()) : undefined;
  }
}
