import { CooldownRecord, ErrorsRecord, fleetKeys, fleetToken, SlotRecord, SubmitsRecord, WaitRecord, type PolicyRecord } from "../../../contracts/fleet.ts";
import { ConcurrencyError } from "../../shared/errors.ts";
import type { FleetStore, Versioned } from "../../shared/fleetStore.ts";
import type { KvMirror } from "../../shared/kvMirror.ts";
import type { Logger } from "../../shared/log.ts";

/** A slot this runner holds: which one, and the revision its next refresh or release must expect. */
export interface HeldSlot {
  channel: string;
  n: number;
  revision: number;
  account: string;
  taskId: number | undefined;
}

type HeldRecord = Extract<SlotRecord, { state: "held" }>;

const RECENT_ERRORS = 5;
/** Submits remembered for the observed rate (`reelay channels`). */
const RECENT_SUBMITS = 50;
/** Races lost in a row before a write gives up (each lost race means another runner moved on). */
const MAX_RACES = 20;

/**
 * The fleet's view of each channel, mirrored from bucket `fleet` (contracts/fleet.ts), and the guarded writes
 * that change it. No runner's memory decides a limit: a slot is one key, taken only by a write that expects
 * the revision its taker saw free, so at most `maxInFlight` tasks hold a channel's slots whatever the number
 * of runners; a holder refreshes its slot every third of the lease, and a holder that dies stops doing so, so
 * its slot counts as free one lease after its last refresh.
 */
export class FleetChannels {
  private readonly view = new Map<string, Versioned>();
  /** Each channel's held slot records by slot number, and its waiting records by key (by channel token): kept as the view changes. */
  private readonly slotsOf = new Map<string, Map<number, HeldRecord>>();
  private readonly waitsOf = new Map<string, Map<string, WaitRecord>>();
  private readonly parsed = new WeakMap<Versioned, unknown>();
  /** The last submit reservation per channel: the next one starts after it. */
  private readonly submitQueues = new Map<string, Promise<number>>();
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

  /** Slots held now (by their records' `until`), by slot number. */
  held(channel: string, max: number, now = Date.now()): Map<number, HeldRecord> {
    const held = new Map<number, HeldRecord>();
    for (const [n, record] of this.slotsOf.get(fleetToken(channel)) ?? []) if (n < max && record.until > now) held.set(n, record);
    return held;
  }

  coolingUntil(channel: string): CooldownRecord | undefined {
    return this.parse(fleetKeys.cooldown(channel), CooldownRecord);
  }

  /** Other runners' waiting tasks on `channel` still counted (their records' `until`), with a count above 0. */
  waitingElsewhere(channel: string, now = Date.now()): WaitRecord[] {
    return [...(this.waitsOf.get(fleetToken(channel))?.values() ?? [])].filter((record) => record.runner !== this.runner && record.count > 0 && record.until > now);
  }

  /**
   * Takes a free slot among `max` for `account`'s task: a guarded write per try, on a slot the view shows free;
   * a lost race rereads that slot and tries another. Undefined when none is free.
   */
  async claim(channel: string, max: number, account: string, taskId: number | undefined): Promise<HeldSlot | undefined> {
    for (let races = 0; races < MAX_RACES; races++) {
      const now = Date.now();
      const held = this.held(channel, max, now);
      if (held.size >= max) return undefined;
      // From a random slot on, the first free one: runners that see the same free slots mostly try different ones.
      let n = Math.floor(Math.random() * max);
      while (held.has(n)) n = (n + 1) % max;
      const key = fleetKeys.slot(channel, n);
      const record: SlotRecord = { state: "held", channel, runner: this.runner, account, ...(taskId === undefined ? {} : { taskId }), until: now + this.leaseMs };
      try {
        const revision = await this.writeAt(key, record, this.view.get(key)?.revision ?? 0, this.leaseMs * 2);
        return { channel, n, revision, account, taskId };
      } catch (error) {
        if (!(error instanceof ConcurrencyError)) throw error;
        await this.reread(key);
      }
    }
    return undefined;
  }

  /** Extends a held slot by one lease; false when another runner took it (it had expired). */
  async refresh(slot: HeldSlot): Promise<boolean> {
    const record: SlotRecord = { state: "held", channel: slot.channel, runner: this.runner, account: slot.account, ...(slot.taskId === undefined ? {} : { taskId: slot.taskId }), until: Date.now() + this.leaseMs };
    try {
      slot.revision = await this.writeAt(fleetKeys.slot(slot.channel, slot.n), record, slot.revision, this.leaseMs * 2);
      return true;
    } catch (error) {
      if (error instanceof ConcurrencyError) return false;
      throw error;
    }
  }

  /** Gives a held slot back (unless someone took it meanwhile: then it is theirs already). */
  async release(slot: HeldSlot): Promise<void> {
    try {
      await this.writeAt(fleetKeys.slot(slot.channel, slot.n), { state: "free", channel: slot.channel } satisfies SlotRecord, slot.revision, this.leaseMs * 2);
    } catch (error) {
      if (!(error instanceof ConcurrencyError)) throw error;
    }
  }

  /** Says how many of `account`'s tasks this runner holds waiting for `channel` (0: none any more), and when it last served the account there. */
  async setWaiting(channel: string, account: string, waiting: { count: number; since: number; servedAt: number }): Promise<void> {
    const record: WaitRecord = { channel, runner: this.runner, account, ...waiting, until: Date.now() + this.leaseMs };
    await this.writeAt(fleetKeys.wait(channel, this.runner, account), record, undefined, this.leaseMs * 2);
  }

  /**
   * The time this submit may go under the channel's `submitsPerSecond`, reserved for it: the channel's next
   * free time moves on by one interval with a guarded write, so submits of every runner are spaced as one.
   * This runner's submits on a channel reserve one at a time (only runners race each other); a lost race
   * means another runner's submit got that turn, so it is tried again, never given up (a ConcurrencyError
   * here would read as a lost race on the task's log).
   */
  submitAt(channel: string, perSecond: number): Promise<number> {
    const turn = (this.submitQueues.get(channel) ?? Promise.resolve(0)).catch(() => 0).then(() => this.reserveSubmit(channel, perSecond));
    this.submitQueues.set(channel, turn);
    return turn;
  }

  private async reserveSubmit(channel: string, perSecond: number): Promise<number> {
    const key = fleetKeys.submits(channel);
    for (;;) {
      const now = Date.now();
      const last = this.parse(key, SubmitsRecord);
      const at = Math.max(now, last?.nextAt ?? 0);
      const recent = [...(last?.recent ?? []).filter((time) => time > now - 60_000), at].slice(-RECENT_SUBMITS);
      const record: SubmitsRecord = { channel, nextAt: Math.ceil(at + 1000 / perSecond), recent };
      try {
        await this.writeAt(key, record, this.view.get(key)?.revision ?? 0, 60 * 60_000);
        return at;
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

  /** Puts a record in the view (undefined: removes it), and in the channel's slot or waiting index. */
  private set(key: string, record: Versioned | undefined): void {
    if (record === undefined) this.view.delete(key);
    else this.view.set(key, record);
    const [, token = "", kind, ...rest] = key.split(".");
    if (kind === "slot") {
      const slots = this.slotsOf.get(token) ?? new Map<number, HeldRecord>();
      this.slotsOf.set(token, slots);
      const parsed = SlotRecord.safeParse(record?.value);
      if (parsed.success && parsed.data.state === "held") slots.set(Number(rest[0]), parsed.data);
      else slots.delete(Number(rest[0]));
    } else if (kind === "wait") {
      const waits = this.waitsOf.get(token) ?? new Map<string, WaitRecord>();
      this.waitsOf.set(token, waits);
      const parsed = WaitRecord.safeParse(record?.value);
      if (parsed.success) waits.set(key, parsed.data);
      else waits.delete(key);
    }
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
