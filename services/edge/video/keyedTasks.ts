import type { JetStreamManager } from "@nats-io/jetstream";
import { LRUCache } from "lru-cache";
import { CONSUMERS, STREAMS, SURELY_DEDUPLICATED_MS } from "../../../infra/jetstreamLayout.ts";
import { readConsumerFloor } from "../../shared/consumerFloor.ts";
import { ServiceUnavailableError } from "../../shared/errors.ts";
import { KEY_LIFETIME_MS, type IdempotencyIndex, type KeyedTask } from "../../tasks/idempotencyIndex.ts";
import { readKeyedOpenings, type KeyedOpeningsRead, type OpeningsFrom } from "./keyedOpenings.ts";

/** In the steady state the index's floor is read again this long before the duplicate window passes it (every ~45 s). */
const REFRESH_AHEAD_MS = 60_000;
/** While the index lags past the window, its floor is read at most this often. */
const REREAD_AFTER_MS = 1_000;
/** Openings of one account read to cover a lagging index; past them a keyed create answers 503 rather than guess. */
const MAX_GAP_READ = 20_000;
/** Keys met in the openings read, over all accounts, kept for the next keyed creates while the index lags. */
const MAX_KEYS_KEPT = 200_000;

/** Where a keyed create looks for the task its key already made. */
export interface KeyedTaskSources {
  index: Pick<IdempotencyIndex, "find">;
  /** When the oldest opening the index may not hold yet was written; undefined when it holds every one. */
  oldestUnindexedAt(): Promise<Date | undefined>;
  /** An account's openings from a point to the end of the log (about `max` at most): the keyed ones, and where to go on. */
  keyedOpenings(account: string, from: OpeningsFrom, max: number): Promise<KeyedOpeningsRead>;
  now(): number;
}

/** One account's openings read while the index lags: where reading goes on, and the keys met so far. */
interface AccountReading {
  next: OpeningsFrom;
  keys: Map<string, KeyedTask>;
  read: number;
  /** The read under way: another find for the account reads on after it, never the same openings again. */
  busy: Promise<void> | undefined;
}

/**
 * The task an Idempotency-Key made, wherever it is known. A keyed opening is found by the server's msgID memory
 * while it is in the stream's duplicate window (the write itself finds it), and by the key index after that,
 * once the task-log reactors have written it there. When the reactors lag further behind than the window (a
 * projector down for minutes), an opening can be in neither: the account's openings from the reactors' floor
 * on are read instead, or a retry would make a second task for one key.
 *
 * The floor is read from the server now and then, not at every create: it only moves forward, so an earlier
 * reading stays a true bound and is read again before the window reaches it. An account's openings are read
 * once while the lag lasts: each later keyed create reads only the ones written since (a tenant retrying many
 * keys at once must not make the edge read its whole history for each).
 */
export class KeyedTasks {
  private observed: { indexedBefore: number; readAt: number } | undefined;
  private observing: Promise<number> | undefined;
  private readonly readings = new LRUCache<string, AccountReading>({ maxSize: MAX_KEYS_KEPT, sizeCalculation: (reading) => reading.keys.size + 1 });

  constructor(private readonly sources: KeyedTaskSources) {}

  async find(account: string, keyHash: string): Promise<KeyedTask | undefined> {
    const indexed = await this.sources.index.find(account, keyHash);
    if (indexed) return indexed;
    const unindexedFrom = await this.unindexedPastWindow();
    if (unindexedFrom === undefined) {
      // Caught up (again): what was read for the lag is not needed any more.
      this.readings.clear();
      return undefined;
    }
    // A key older than its lifetime names no task any more, as in the index.
    const since = Math.max(unindexedFrom, this.sources.now() - KEY_LIFETIME_MS);
    return (await this.readOn(account, since)).keys.get(keyHash);
  }

  /** The account's openings read up to now, from `since` (the first time) or from where the last read ended. */
  private async readOn(account: string, since: number): Promise<AccountReading> {
    let reading = this.readings.get(account);
    if (reading === undefined) {
      reading = { next: { start_time: new Date(since) }, keys: new Map(), read: 0, busy: undefined };
      this.readings.set(account, reading);
    }
    while (reading.busy) await reading.busy;
    const current = reading;
    current.busy = (async () => {
      const { keyed, read, next } = await this.sources.keyedOpenings(account, current.next, MAX_GAP_READ + 1 - current.read);
      current.next = next;
      current.read += read;
      // A key's first opening is its task (a later one with the same key can only follow the key's expiry).
      for (const opening of keyed) if (!current.keys.has(opening.keyHash)) current.keys.set(opening.keyHash, opening.task);
    })().finally(() => (current.busy = undefined));
    await current.busy;
    if (this.readings.get(account) === current) this.readings.set(account, current);
    if (current.read > MAX_GAP_READ) {
      throw new ServiceUnavailableError(
        "the Idempotency-Key index is behind (the task-log reactors are not keeping up): a create with this key may already exist; retry shortly",
        5,
      );
    }
    return current;
  }

  /** From when openings may be neither in the index nor surely in the server's msgID memory; undefined: none can. */
  private async unindexedPastWindow(): Promise<number | undefined> {
    const now = this.sources.now();
    const rememberedSince = now - SURELY_DEDUPLICATED_MS;
    const { observed } = this;
    const stale = observed === undefined || (observed.indexedBefore <= rememberedSince + REFRESH_AHEAD_MS && now - observed.readAt >= REREAD_AFTER_MS);
    const indexedBefore = stale ? await this.observe() : observed.indexedBefore;
    return indexedBefore > rememberedSince ? undefined : indexedBefore;
  }

  private observe(): Promise<number> {
    this.observing ??= (async () => {
      const readAt = this.sources.now();
      const oldest = await this.sources.oldestUnindexedAt();
      // Caught up: everything written before the question is indexed.
      const indexedBefore = Math.max(oldest?.getTime() ?? readAt, this.observed?.indexedBefore ?? -Infinity);
      this.observed = { indexedBefore, readAt };
      return indexedBefore;
    })().finally(() => (this.observing = undefined));
    return this.observing;
  }
}

/** The sources as an edge has them: the key index, the task-log reactors' consumer, the account's openings. */
export function keyedTaskSources(jsm: JetStreamManager, index: Pick<IdempotencyIndex, "find">): KeyedTaskSources {
  return {
    index,
    // The reactors acknowledge a batch once its index writes are kept: their floor is the index's.
    oldestUnindexedAt: async () => (await readConsumerFloor(jsm, STREAMS.events.name, CONSUMERS.taskLogReactors)).oldestOwedAt,
    keyedOpenings: (account, from, max) => readKeyedOpenings(jsm, account, from, max),
    now: Date.now,
  };
}
