import { createHash } from "node:crypto";
import type { KV } from "@nats-io/kv";
import { z } from "zod";
import { ValidationError } from "../../shared/errors.ts";

const Claim = z.object({ taskId: z.number().int().positive(), at: z.string() });

/**
 * Idempotency-Key → task, per account (bucket `idempotency`). Claiming is a KV create, which only one
 * writer can win: two identical retries racing on two edges still make one task and one reservation.
 */
export class IdempotencyKeys {
  constructor(private readonly bucket: KV) {}

  static validate(header: string): string {
    if (header.length > 255) throw new ValidationError("Idempotency-Key must be at most 255 characters");
    return header;
  }

  async find(account: string, key: string): Promise<number | undefined> {
    const entry = await this.bucket.get(this.name(account, key));
    return entry && entry.operation === "PUT" ? Claim.parse(entry.json()).taskId : undefined;
  }

  /** Claims the key for `taskId`; resolves to the task that owns it (ours, or the one that won). */
  async claim(account: string, key: string, taskId: number): Promise<number> {
    try {
      await this.bucket.create(this.name(account, key), JSON.stringify({ taskId, at: new Date().toISOString() }));
      return taskId;
    } catch (error) {
      const owner = await this.find(account, key);
      if (owner === undefined) throw error;
      return owner;
    }
  }

  /** A create that was refused (e.g. 403) gives its key back, so the retry after a top-up can succeed. */
  async release(account: string, key: string): Promise<void> {
    await this.bucket.delete(this.name(account, key));
  }

  private name(account: string, key: string): string {
    return `${account}.${createHash("sha256").update(key).digest("hex")}`;
  }
}
