import type { KV } from "@nats-io/kv";
import { z } from "zod";
import { RateLimitedError } from "./errors.ts";

/** One account's stored uploads: name → size and when the store drops it anyway (epoch ms). */
const UsageRecord = z.object({ uploads: z.record(z.string(), z.object({ bytes: z.number().int().nonnegative(), until: z.number() })) });
type UsageRecord = z.infer<typeof UsageRecord>;

/** Uploads one account may hold at once, whatever their size: keeps its record one small KV value. */
const MAX_UPLOADS = 1000;
const ATTEMPTS = 5;

/** An account's stored references would pass its quota (a 4xx: the account's own tasks hold the space). */
export class ReferenceQuotaError extends RateLimitedError {}

/**
 * What each account keeps in the references store, for its quota (`videos.referenceBytesPerAccount`): one KV
 * entry per account, changed with compare-and-set so concurrent creates of one account cannot both take the
 * last bytes. An upload is counted from before it is stored until its task ends (the runner releases it) or
 * the store's max age drops it (`until`), so an upload whose release was lost stops counting by itself.
 */
export class ReferenceUsage {
  constructor(private readonly bucket: KV) {}

  /** Counts `bytes` for `name`, or throws ReferenceQuotaError when the account's uploads would pass `quotaBytes`. */
  async reserve(account: string, name: string, bytes: number, quotaBytes: number, until: number): Promise<void> {
    await this.change(account, (record, now) => {
      const live = Object.entries(record.uploads).filter(([, upload]) => upload.until > now);
      const used = live.reduce((sum, [, upload]) => sum + upload.bytes, 0);
      if (used + bytes > quotaBytes || live.length >= MAX_UPLOADS) {
        throw new ReferenceQuotaError(
          `reference storage quota: this account's uploads held for its unfinished tasks take ${used} bytes (${live.length} files); ` +
            `this one (${bytes} bytes) would pass the limit of ${quotaBytes} bytes or ${MAX_UPLOADS} files; retry when some of those tasks end`,
        );
      }
      return { uploads: { ...Object.fromEntries(live), [name]: { bytes, until } } };
    });
  }

  /** Stops counting `name` (its task ended, or it was never used). */
  async release(account: string, name: string): Promise<void> {
    await this.change(account, (record, now) => ({ uploads: Object.fromEntries(Object.entries(record.uploads).filter(([key, upload]) => key !== name && upload.until > now)) }));
  }

  private async change(account: string, next: (record: UsageRecord, now: number) => UsageRecord): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const entry = await this.bucket.get(account);
      const found = entry?.operation === "PUT" ? { record: UsageRecord.parse(entry.json()), revision: entry.revision } : undefined;
      const value = JSON.stringify(next(found?.record ?? { uploads: {} }, Date.now()));
      try {
        if (found) await this.bucket.update(account, value, found.revision);
        else await this.bucket.create(account, value);
        return;
      } catch (error) {
        // Another create or release of this account wrote first: read again and decide again.
        if (attempt >= ATTEMPTS) throw error;
      }
    }
  }
}
