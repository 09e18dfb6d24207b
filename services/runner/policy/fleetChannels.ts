import { BlocksRecord, CooldownRecord, ErrorsRecord, fleetKeys, fleetToken, SubmitsRecord, WaitRecord, type Block, type PolicyRecord } from "../../../contracts/fleet.ts";
import { ConcurrencyError } from "../../shared/errors.ts";
import type { FleetStore, Versioned } from "../../shared/fleetStore.ts";
import type { KvMirror } from "../../shared/kvMirror.ts";
import type { Logger } from "../../shared/log.ts";

/** This runner's block as it wants it written: its size and what its tasks hold of it. */
export interface BlockWish {
  size: number;
  inUse: number;
  byAccount: Record<string, number>;
}

const RECENT_ERRORS = 5;
/** Submits remembered for the observed rate (`reelay channels`). */
const RECENT_SUBMITS = 50;

/**
 * The fleet's view of each channel, mirrored from bucket `fleet` (contracts/fleet.ts), and the guarded writes
 * that change it. No runner's memory decides a limit: a channel's slots are dealt in blocks, one per runner,
 * all in one record (`chan.<c>.blocks`) changed only by a write that expects the revision its writer read, and
 * no write makes the live blocks sum to more than `maxInFlight`; so whatever the number of runners, at most
 * `maxInFlight` tasks hold a channel. A runner refreshes its block every third of the lease; one that dies
 * stops doing so, and its block counts as free one lease after its last refresh.
 */
export class FleetChannels {
  private readonly view = new Map<string, Versioned>();
  /** Each channel's blocks record, and its waiting records by key (by channel token): kept as the view changes. */
  private readonly blocksOf = new Map<string, BlocksRecord>();
  private readonly waitsOf = new Map<string, Map<string, WaitRecord>>();
  /** When (Date.now()) each channel's waiting records were last pruned (see `pruneWaits`). */
  private readonly waitsPrunedAt = new Map<string, number>();
  private readonly parsed = new WeakMap<Versioned, unknown>();
  /** The last submit reservation per channel: the next one starts after it. */
  private readonly submitQueues = new Map<string, Promise<number>>();
  /** Submit turns reserved for this runner and not yet used, per channel: `next` is the next one's time, none from `end` on. */
  private readonly submitBatches = new Map<string, { next: number; end: number }>();
  private mirror: KvMirror<Versioned> | undefined;

  constructor(
    private readonly store: FleetStore,
    readonly runner: string,
    readonly leaseMs: number,
    private readonly log: Logger,
    /** Runs after the view changed (another runner's write, or our own). */
    private readonly changed: () => void,
  ) {}

  async start(policies: readonly PolicyRecord[]): Promise<void> {
    this.mirror = this.store.mirror(
      fleetKeys.channels,
      (key, record) => {
        // Our own write may be in the view already, newer than what the watch delivers now.
        if (record !== undefined && (this.view.get(key)?.revision ?? 0) >= record.revision) return;
        this.set(key, record);
        this.changed();
      },
      this.log,
    );
    await this.mirror.start();
    // The policy a runner was configured with, for reports (`reelay channels` reads no config of runners).
    for (const policy of policies) await this.store.write(fleetKeys.policy(policy.channel), policy, { ttlMs: 7 * 24 * 60 * 60_000 });
  }

  stop(): void {
    this.mirror?.stop();
  }

  /** The channel's blocks counting now (by their `until`), by runner. */
  blocks(channel: string, now = Date.now()): Map<string, Block> {
    const live = new Map<string, Block>();
    for (const [runner, block] of Object.entries(this.blocksOf.get(fleetToken(channel))?.blocks ?? {})) if (block.until > now) live.set(runner, block);
    return live;
  }

  coolingUntil(channel: string): CooldownRecord | undefined {
    return this.parse(fleetKeys.cooldown(channel), CooldownRecord);
  }

  /** Other runners' waiting tasks on `channel` still counted (their records' `until`), with a count above 0. */
  waitingElsewhere(channel: string, now = Date.now()): WaitRecord[] {
    return [...(this.waitsOf.get(fleetToken(channel))?.values() ?? [])].filter((record) => this.countsElsewhere(record, now));
  }

  /** Whether another runner has a task waiting on `channel` (asked for every slot granted and given back: no list built). */
  anyWaitingElsewhere(channel: string, now = Date.now()): boolean {
    const records = this.waitsOf.get(fleetToken(channel));
    if (records === undefined) return false;
    for (const record of records.values()) if (this.countsElsewhere(record, now)) return true;
    return false;
  }

  private countsElsewhere(record: WaitRecord, now: number): boolean {
    return record.runner !== this.runner && record.count > 0 && record.until > now;
  }

  /**
   * Writes this runner's block of `channel` as `wish(free)` asks, where `free` is what the other runners' live
   * blocks leave of `max`; the size written is cut to `free` (so the sum stays within `max`), 0 removes the
   * block. One guarded write on the channel's record (dead runners' blocks pruned); a lost race rereads it
   * and asks again. Returns the size written.
   */
  async writeBlock(channel: string, max: number, wish: (free: number) => BlockWish): Promise<number> {
    const key = fleetKeys.blocks(channel);
    for (;;) {
      const now = Date.now();
      const blocks: Record<string, Block> = {};
      let others = 0;
      for (const [runner, block] of this.blocks(channel, now)) {
        if (runner === this.runner) continue;
        blocks[runner] = block;
        others += block.size;
      }
      const free = Math.max(0, max - others);
      const wanted = wish(free);
      const size = Math.min(wanted.size, free);
      if (size > 0 || wanted.inUse > 0) blocks[this.runner] = { size, inUse: wanted.inUse, byAccount: wanted.byAccount, until: now + this.leaseMs };
      try {
        await this.writeAt(key, { channel, blocks } satisfies BlocksRecord, this.view.get(key)?.revision ?? 0, this.leaseMs * 2);
        return size;
      } catch (error) {
        if (!(error instanceof ConcurrencyError)) throw error;
        await this.reread(key);
      }
    }
  }

  /** Says how many of `account`'s tasks this runner holds waiting for `channel` (0: none any more), and when it last served the account there. */
  async setWaiting(channel: string, account: string, waiting: { count: number; since: number; servedAt: number }): Promise<void> {
    const record: WaitRecord = { channel, runner: this.runner, account, ...waiting, until: Date.now() + this.leaseMs };
    await this.writeAt(fleetKeys.wait(channel, this.runner, account), record, undefined, this.leaseMs * 2);
  }

  /**
   * The time this submit may go under the channel's `submitsPerSecond`. Turns are reserved for the fleet in
   * batches of 100 ms of the rate (at least one turn): the channel's next free time moves on by the batch with
   * one guarded write, so submits of every runner are spaced as one, and this runner spaces its own within the
   * batch. A turn not used before the batch ends is lost (the rate is a ceiling). This runner's reservations
   * on a channel go one at a time (only runners race each other); a lost race means another runner got those
   * turns, so it is tried again, never given up (a ConcurrencyError here would read as a lost race on the
   * task's log).
   */
  submitAt(channel: string, perSecond: number): Promise<number> {
    const turn = (this.submitQueues.get(channel) ?? Promise.resolve(0)).catch(() => 0).then(() => this.nextSubmit(channel, perSecond));
    this.submitQueues.set(channel, turn);
    return turn;
  }

  private async nextSubmit(channel: string, perSecond: number): Promise<number> {
    const interval = 1000 / perSecond;
    let batch = this.submitBatches.get(channel);
    if (batch === undefined || Math.max(batch.next, Date.now()) >= batch.end) {
      batch = await this.reserveSubmits(channel, perSecond);
      this.submitBatches.set(channel, batch);
    }
    const at = Math.max(batch.next, Date.now());
    batch.next = at + interval;
    return Math.ceil(at);
  }

  private async reserveSubmits(channel: string, perSecond: number): Promise<{ next: number; end: number }> {
    const key = fleetKeys.submits(channel);
    const turns = Math.max(1, Math.floor(perSecond / 10));
    for (;;) {
      const now = Date.now();
      const last = this.parse(key, SubmitsRecord);
      const at = Math.max(now, last?.nextAt ?? 0);
      const end = Math.ceil(at + (turns * 1000) / perSecond);
      // The turns reserved, for the observed rate (`reelay channels`): a turn left unused is counted too.
      const reserved = Array.from({ length: Math.min(turns, RECENT_SUBMITS) }, (_, i) => Math.ceil(at + (i * 1000) / perSecond));
      const recent = [...(last?.recent ?? []).filter((time) => time > now - 60_000), ...reserved].slice(-RECENT_SUBMITS);
      const record: SubmitsRecord = { channel, nextAt: end, recent };
      try {
        await this.writeAt(key, record, this.view.get(key)?.revision ?? 0, 60 * 60_000);
        return { next: at, end };
      } catch (error) {
        if (!(error instanceof ConcurrencyError)) throw error;
        await this.reread(key);
      }
    }
  }

  /** Takes the channel out of rotation for every runner; false when it already was. */
  async sideline(channel: string, coolDownMs: number, why: string): Promise<boolean> {
    const now = Date.now();
    if ((this.coolingUntil(channel)?.until ?? 0) > now) return false;
    const record: CooldownRecord = { channel, until: now + coolDownMs, why, by: this.runner };
    await this.writeAt(fleetKeys.cooldown(channel), record, undefined, coolDownMs + 1000);
    return true;
  }

  /** Adds an error to the channel's recent ones (last writer wins on a race: a report, not a limit). */
  async noteError(channel: string, message: string): Promise<void> {
    const last = this.parse(fleetKeys.errors(channel), ErrorsRecord);
    const recent = [...(last?.recent ?? []), { at: new Date().toISOString(), message }].slice(-RECENT_ERRORS);
    await this.writeAt(fleetKeys.errors(channel), { ...last, channel, recent } satisfies ErrorsRecord, undefined, 24 * 60 * 60_000);
  }

  /** Counts a failed clean-up; true the first time the fleet sees one on this channel. */
  async cleanupFailed(channel: string, message: string): Promise<boolean> {
    const last = this.parse(fleetKeys.errors(channel), ErrorsRecord);
    const cleanupFailures = { count: (last?.cleanupFailures?.count ?? 0) + 1, last: { at: new Date().toISOString(), message } };
    await this.writeAt(fleetKeys.errors(channel), { channel, recent: last?.recent ?? [], cleanupFailures } satisfies ErrorsRecord, undefined, 24 * 60 * 60_000);
    return cleanupFailures.count === 1;
  }

  private async writeAt(key: string, value: unknown, expect: number | undefined, ttlMs: number): Promise<number> {
    const revision = await this.store.write(key, value, { ttlMs, ...(expect === undefined ? {} : { expect }) });
    if ((this.view.get(key)?.revision ?? 0) < revision) this.set(key, { revision, value });
    this.changed();
    return revision;
  }

  private async reread(key: string): Promise<void> {
    const current = await this.store.read(key);
    this.set(key, current.revision === 0 ? undefined : current);
  }

  /** Puts a record in the view (undefined: removes it), and in the channel's blocks or waiting index. */
  private set(key: string, record: Versioned | undefined): void {
    if (record === undefined) this.view.delete(key);
    else this.view.set(key, record);
    const [, token = "", kind] = key.split(".");
    if (kind === "blocks") {
      const parsed = BlocksRecord.safeParse(record?.value);
      if (parsed.success) this.blocksOf.set(token, parsed.data);
      else this.blocksOf.delete(token);
    } else if (kind === "wait") {
      const waits = this.waitsOf.get(token) ?? new Map<string, WaitRecord>();
      this.waitsOf.set(token, waits);
      const parsed = WaitRecord.safeParse(record?.value);
      if (parsed.success) waits.set(key, parsed.data);
      else waits.delete(key);
      this.pruneWaits(token, waits);
    }
  }

  /**
   * Drops a channel's waiting records that stopped counting a lease ago (their runner stopped writing them, or
   * is gone), at most once a lease. The server lets such a record expire without telling a watcher (no delete
   * marker: a guarded write after one would have to expect its sequence), so the view kept every one: a record
   * per runner (a new name at each start), account and channel, until this runner stopped.
   */
  private pruneWaits(token: string, waits: Map<string, WaitRecord>, now = Date.now()): void {
    if (now - (this.waitsPrunedAt.get(token) ?? 0) < this.leaseMs) return;
    this.waitsPrunedAt.set(token, now);
    for (const [key, record] of waits) {
      if (record.until >= now - this.leaseMs) continue;
      waits.delete(key);
      this.view.delete(key);
    }
  }

  /** Records in this runner's view of the fleet (expired waiting records pruned). */
  get recordsInView(): number {
    return this.view.size;
  }

  private parse<T>(key: string, schema: { safeParse(value: unknown): { success: true; data: T } | { success: false } }): T | undefined {
    const entry = this.view.get(key);
    if (entry === undefined) return undefined;
    // Read on every pass over the waiters (the cool-down): parsed once per record. A key holds one kind of record.
    if (this.parsed.has(entry)) return this.parsed.get(entry) as T | undefined;
    const parsed = schema.safeParse(entry.value);
    const value = parsed.success ? parsed.data : undefined;
    this.parsed.set(entry, value);
    return value;
  }
}
