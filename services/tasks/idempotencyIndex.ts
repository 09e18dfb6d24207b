import type { JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { z } from "zod";
import { BUCKETS } from "../../infra/jetstreamLayout.ts";
import type { TaskLogEntry } from "../shared/taskLog.ts";

/** The task an Idempotency-Key made, and the fingerprint of the request that made it. */
export const KeyedTask = z.object({ taskId: z.number().int().positive(), fingerprint: z.string() });
export type KeyedTask = z.infer<typeof KeyedTask>;

/** How long a key returns the same task (as Stripe's do): a per-message TTL on the index entry. */
const KEY_LIFETIME_HOURS = 24;
export const KEY_LIFETIME_MS = KEY_LIFETIME_HOURS * 60 * 60_000;

const entryName = (account: string, keyHash: string): string => `${account}.${keyHash}`;

/**
 * Idempotency-Key (its hash) → the task its create opened, per account (bucket `idempotency`), for retries
 * that come after the stream's duplicate window (within it, the opening's msgID finds the task by itself).
 * Each entry carries its own TTL (per-message TTL, nats-server ≥ 2.11), so keys expire without a sweep.
 */
export class IdempotencyIndex {
  constructor(private readonly js: JetStreamClient, private readonly bucket: KV) {}

  async find(account: string, keyHash: string): Promise<KeyedTask | undefined> {
    const entry = await this.bucket.get(entryName(account, keyHash));
    if (!entry || entry.operation !== "PUT" || entry.length === 0) return undefined;
    return KeyedTask.parse(entry.json());
  }

  /** Records a keyed opening (a repeat writes the same entry again: harmless). */
  async record(account: string, keyHash: string, task: KeyedTask): Promise<void> {
    await this.js.publish(`$KV.${BUCKETS.idempotency}.${entryName(account, keyHash)}`, JSON.stringify(task), { ttl: `${KEY_LIFETIME_HOURS}h` });
  }
}

/** The reactor that fills the index from each keyed opening in the task log (services/projector/eventReactors.ts). */
export class IdempotencyIndexer {
  constructor(private readonly index: IdempotencyIndex) {}

  async handleEntries(entries: readonly TaskLogEntry[]): Promise<void> {
    const writes: Array<Promise<void>> = [];
    for (const { event, account } of entries) {
      if (event.type !== "TaskSubmitted" || !event.data.idempotency) continue;
      const { keyHash, fingerprint } = event.data.idempotency;
      writes.push(this.index.record(account, keyHash, { taskId: event.meta.taskId, fingerprint }));
    }
    await Promise.all(writes);
  }
}
