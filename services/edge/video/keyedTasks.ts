import type { JetStreamManager } from "@nats-io/jetstream";
import { CONSUMERS, STREAMS, SURELY_DEDUPLICATED_MS } from "../../../infra/jetstreamLayout.ts";
import { readConsumerFloor } from "../../shared/consumerFloor.ts";
import { KEY_LIFETIME_HOURS, type IdempotencyIndex, type KeyedTask } from "../../tasks/idempotencyIndex.ts";
import { keyedOpeningSince } from "./keyedOpenings.ts";

/** In the steady state the index's floor is read again this long before the duplicate window passes it (every ~45 s). */
const REFRESH_AHEAD_MS = 60_000;
/** While the index lags past the window, its floor is read at most this often. */
const REREAD_AFTER_MS = 1_000;
/** Openings of one account read to cover a lagging index; past them the create answers 503 rather than guess. */
const MAX_GAP_READ = 20_000;
const KEY_LIFETIME_MS = KEY_LIFETIME_HOURS * 60 * 60_000;

/** Where a keyed create looks for the task its key already made. */
export interface KeyedTaskSources {
  index: Pick<IdempotencyIndex, "find">;
  /** When the oldest opening the index may not hold yet was written; undefined when it holds every one. */
  oldestUnindexedAt(): Promise<Date | undefined>;
  /** The key's opening among the account's openings written since a time. */
  openingSince(account: string, keyHash: string, since: Date): Promise<KeyedTask | undefined>;
  now(): number;
}

/**
 * The task an Idempotency-Key made, wherever it is known. A keyed opening is found by the server's msgID memory
 * while it is in the stream's duplicate window (the write itself finds it), and by the key index after that,
 * once the task-log reactors have written it there. When the reactors lag further behind than the window (a
 * projector down for minutes), an opening can be in neither: the account's openings from the reactors' floor
 * on are read instead, or a retry would make a second task for one key.
 *
 * The floor is read from the server now and then, not at every create: it only moves forward, so an earlier
 * reading stays a true bound and is read again before the window reaches it.
 */
export class KeyedTasks {
  private observed: { indexedBefore: number; readAt: number } | undefined;
  private reading: Promise<number> | undefined;

  constructor(private readonly sources: KeyedTaskSources) {}

  async find(account: string, keyHash: string): Promise<KeyedTask | undefined> {
    const indexed = await this.sources.index.find(account, keyHash);
    if (indexed) return indexed;
    const unindexedFrom = await this.unindexedPastWindow();
    if (unindexedFrom === undefined) return undefined;
    // A key older than its lifetime names no task any more, as in the index.
    const since = Math.max(unindexedFrom, this.sources.now() - KEY_LIFETIME_MS);
    return this.sources.openingSince(account, keyHash, new Date(since));
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
    this.reading ??= (async () => {
      const readAt = this.sources.now();
      const oldest = await this.sources.oldestUnindexedAt();
      // Caught up: everything written before the question is indexed.
      const indexedBefore = Math.max(oldest?.getTime() ?? readAt, this.observed?.indexedBefore ?? -Infinity);
      this.observed = { indexedBefore, readAt };
      return indexedBefore;
    })().finally(() => (this.reading = undefined));
    return this.reading;
  }
}

/** The sources as an edge has them: the key index, the task-log reactors' consumer, the account's openings. */
export function keyedTaskSources(jsm: JetStreamManager, index: Pick<IdempotencyIndex, "find">): KeyedTaskSources {
  return {
    index,
    // The reactors acknowledge a batch once its index writes are kept: their floor is the index's.
    oldestUnindexedAt: async () => (await readConsumerFloor(jsm, STREAMS.events.name, CONSUMERS.taskLogReactors)).oldestOwedAt,
    openingSince: (account, keyHash, since) => keyedOpeningSince(jsm, account, keyHash, since, MAX_GAP_READ),
    now: Date.now,
  };
}
