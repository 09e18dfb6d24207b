import { randomBytes } from "node:crypto";
import type { KV } from "@nats-io/kv";
import { AdminTokenIndexEntry, AdminTokenName, AdminTokenRecord } from "../../contracts/admin.ts";
import { hashApiKey } from "./apiKeys.ts";
import { NotFoundError, ValidationError } from "./errors.ts";

/** Admin tokens start so, customer keys with `rly_`: each opens only its own routes, and a leaked one is recognisable. */
export const ADMIN_TOKEN_PREFIX = "rla_";

/** Creates, lists, revokes and resolves operators' admin tokens in `admin_tokens`; tokens are shown once and stored as hashes. */
export class AdminTokenStore {
  constructor(private readonly bucket: KV) {}

  async create(name: string): Promise<{ token: string; tokenId: string }> {
    const parsed = AdminTokenName.safeParse(name);
    if (!parsed.success) throw new ValidationError(parsed.error.issues[0]?.message ?? "bad admin token name");
    const token = `${ADMIN_TOKEN_PREFIX}${randomBytes(24).toString("base64url")}`;
    const tokenId = randomBytes(6).toString("hex");
    const tokenHash = hashApiKey(token);
    const record: AdminTokenRecord = { tokenId, name, createdAt: new Date().toISOString() };
    // The index entry first: a token that exists can always be found and revoked.
    await this.bucket.create(`id.${tokenId}`, JSON.stringify({ ...record, tokenHash }));
    await this.bucket.create(`hash.${tokenHash}`, JSON.stringify(record));
    return { token, tokenId };
  }

  async list(): Promise<AdminTokenIndexEntry[]> {
    const entries: AdminTokenIndexEntry[] = [];
    for await (const key of await this.bucket.keys("id.*")) {
      const entry = await this.bucket.get(key);
      if (entry?.operation === "PUT") entries.push(AdminTokenIndexEntry.parse(entry.json()));
    }
    return entries.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** By id, or by name when exactly one token has it. */
  async revoke(idOrName: string): Promise<AdminTokenIndexEntry> {
    const byId = /^[0-9a-f]{12}$/.test(idOrName) ? await this.bucket.get(`id.${idOrName}`) : null;
    let entry = byId?.operation === "PUT" ? AdminTokenIndexEntry.parse(byId.json()) : undefined;
    if (!entry) {
      const named = (await this.list()).filter((token) => token.name === idOrName);
      if (named.length > 1) throw new ValidationError(`${named.length} admin tokens are named ${idOrName}: revoke one by its id (reelay admin tokens list)`);
      entry = named[0];
    }
    if (!entry) throw new NotFoundError(`no admin token with id or name ${idOrName}`);
    await this.bucket.delete(`hash.${entry.tokenHash}`);
    await this.bucket.delete(`id.${entry.tokenId}`);
    return entry;
  }

  async lookup(token: string): Promise<AdminTokenRecord | undefined> {
    if (!token.startsWith(ADMIN_TOKEN_PREFIX)) return undefined;
    const entry = await this.bucket.get(`hash.${hashApiKey(token)}`);
    return entry?.operation === "PUT" ? AdminTokenRecord.parse(entry.json()) : undefined;
  }

  async isEmpty(): Promise<boolean> {
    for await (const _key of await this.bucket.keys("id.*")) return false;
    return true;
  }
}
