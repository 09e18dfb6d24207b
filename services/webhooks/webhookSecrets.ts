import { randomBytes } from "node:crypto";
import type { KV } from "@nats-io/kv";
import { lruOf } from "../shared/lruOf.ts";
import { z } from "zod";

/** A rotated-out secret still signs (beside the new one) this long, so receivers can switch over. */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60_000;

const SecretRecord = z.object({
  current: z.string(),
  previous: z.string().optional(),
  rotatedAt: z.string().optional(),
});
type SecretRecord = z.infer<typeof SecretRecord>;

/** `whsec_` + base64 of 24 random bytes, the form the Standard Webhooks libraries take. */
const newSecret = () => `whsec_${randomBytes(24).toString("base64")}`;

/** Each account's webhook signing secret, in the `webhook_secrets` bucket (created on first use). */
export class WebhookSecrets {
  /** Signing secrets read in the last second: a burst of deliveries reads the bucket once per account (a rotation shows within a second). */
  private readonly recent = lruOf<string, string[]>(10_000, { ttl: 1_000 });

  constructor(private readonly bucket: KV) {}

  private async read(account: string): Promise<{ record: SecretRecord; revision: number } | undefined> {
    const entry = await this.bucket.get(account);
    if (!entry || entry.operation !== "PUT") return undefined;
    return { record: SecretRecord.parse(entry.json()), revision: entry.revision };
  }

  /** The account's secret; made on first use (racing creators agree: the bucket's create is exclusive). */
  async secretOf(account: string): Promise<string> {
    const found = await this.read(account);
    if (found) return found.record.current;
    const record: SecretRecord = { current: newSecret() };
    try {
      await this.bucket.create(account, JSON.stringify(record));
      return record.current;
    } catch {
      const raced = await this.read(account);
      if (!raced) throw new Error(`could not create the webhook secret of ${account}`);
      return raced.record.current;
    }
  }

  /** Replaces the secret; the old one keeps signing beside it for a day. Returns the new one. */
  async rotate(account: string): Promise<string> {
    const found = await this.read(account);
    const record: SecretRecord = { current: newSecret(), ...(found ? { previous: found.record.current } : {}), rotatedAt: new Date().toISOString() };
    if (found) await this.bucket.update(account, JSON.stringify(record), found.revision);
    else await this.bucket.create(account, JSON.stringify(record));
    return record.current;
  }

  /**
   * Stops the previous secret signing now instead of at the end of the overlap (it leaked, or every
   * receiver has switched). Returns whether there was one still signing.
   */
  async dropPrevious(account: string, now = Date.now()): Promise<boolean> {
    const found = await this.read(account);
    if (!found?.record.previous) return false;
    const signing = (await this.currentSecrets(account, now)).length > 1;
    await this.bucket.update(account, JSON.stringify({ current: found.record.current } satisfies SecretRecord), found.revision);
    this.recent.delete(account);
    return signing;
  }

  /** The secrets a delivery is signed with now: the current one, and the previous one during the overlap. */
  async signingSecrets(account: string, now = Date.now()): Promise<string[]> {
    const cached = this.recent.get(account);
    if (cached) return cached;
    const secrets = await this.currentSecrets(account, now);
    this.recent.set(account, secrets);
    return secrets;
  }

  private async currentSecrets(account: string, now: number): Promise<string[]> {
    const found = await this.read(account);
    if (!found) return [await this.secretOf(account)];
    const { current, previous, rotatedAt } = found.record;
    const overlapping = previous !== undefined && rotatedAt !== undefined && now - Date.parse(rotatedAt) < ROTATION_OVERLAP_MS;
    return overlapping && previous ? [current, previous] : [current];
  }
}
