import type { Logger } from "../../shared/log.ts";
import type { VideoProvider } from "../providers/types.ts";
import { Slot, type ChannelLease, type ChannelSettings, type FleetSettings, type SlotOwner } from "./channelSlot.ts";
import { ChannelBlock } from "./channelBlock.ts";
import { FleetChannels } from "./fleetChannels.ts";
import { byWeight, channelTurns, fairTurn, type ChannelTurns } from "./fairTurn.ts";
import { WaitingNotices, waitingOn } from "./waitingNotices.ts";

export type { ChannelLease, ChannelSettings, FleetSettings } from "./channelSlot.ts";

/** How long an account's latest slot counts against its turn (a newcomer again after this). */
const SERVED_MEMORY_MS = 60_000;

interface Waiter {
  account: string;
  candidates: readonly string[];
  /** A task already at one channel's upstream is polled there, in rotation or not. */
  pinned: boolean;
  /** Channels to use only when no other candidate has room (the one that just failed this task). */
  avoid: string | undefined;
  since: number;
  grant(channel: string): boolean;
}

/**
 * The runner's side of the fleet's channels. A task asks for a slot on any of its model's channels; it gets
 * one from this runner's block of a channel in rotation (ChannelBlock: no NATS message), the block growing
 * when the fleet (bucket `fleet`, FleetChannels) has slots free, when it is its account's turn there
 * (fairTurn: accounts waiting anywhere in the fleet take turns, whichever runner holds what). Tasks that
 * wait because the fleet had nothing free are published (WaitingNotices), and a runner whose block has room
 * while others wait gives the room back. A channel whose key, quota or account the upstream refused leaves the rotation for every runner.
 */
export class ChannelPool implements SlotOwner {
  readonly fleet: FleetChannels;
  /** Waiters per account; `turns` is the order accounts are served in (an account served goes to the back). */
  private readonly waiting = new Map<string, Waiter[]>();
  private readonly turns: string[] = [];
  private readonly slots = new Set<Slot>();
  private readonly blocks = new Map<string, ChannelBlock>();
  /** Channels this runner took out of rotation, until when: known before the shared record comes back. */
  private readonly sidelined = new Map<string, number>();
  private readonly notices: WaitingNotices;
  private readonly cleanupLogged = new Set<string>();
  /** When this runner last gave an account a slot, per `channel\naccount`: it goes back in line from then. */
  private readonly servedAt = new Map<string, number>();
  /** Channels whose block is growing ahead of its tasks (grantNow): one such write at a time each. */
  private readonly growingAhead = new Set<string>();
  private tick: NodeJS.Timeout | undefined;
  private dispatching = false;
  private beating = false;
  private again = false;

  constructor(
    private readonly channels: ReadonlyMap<string, ChannelSettings>,
    fleet: FleetSettings,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
  ) {
    this.fleet = new FleetChannels(fleet.store, fleet.runner, fleet.leaseMs, log, () => this.dispatch());
    this.notices = new WaitingNotices(this.fleet);
    for (const [channel, { provider }] of channels) this.blocks.set(channel, new ChannelBlock(channel, provider.policy.maxInFlight, this.fleet, log));
  }

  /** Mirrors the fleet's channel records and starts refreshing this runner's blocks; resolves once mirrored. */
  async start(): Promise<void> {
    const policies = [...this.channels].map(([channel, { kind, provider, coolDownMs }]) => ({ channel, kind, maxInFlight: provider.policy.maxInFlight, submitsPerSecond: provider.policy.submitsPerSecond, coolDownMs }));
    await this.fleet.start(policies);
    const every = Math.max(50, Math.min(1000, Math.floor(this.fleet.leaseMs / 6)));
    this.tick = setInterval(() => void this.beat(), every);
    this.tick.unref();
  }

  has(channel: string): boolean {
    return this.channels.has(channel);
  }

  provider(channel: string): VideoProvider | undefined {
    return this.channels.get(channel)?.provider;
  }

  /** Any of `candidates` that could take a task now or after a wait (it exists and is in rotation fleet-wide). */
  anyInRotation(candidates: readonly string[], now = Date.now()): boolean {
    return candidates.some((name) => this.channels.has(name) && !this.cooling(name, now));
  }

  /** Resolves with a slot on one of `candidates` once one is free and it is this account's turn; rejects when `signal` aborts. */
  acquire(account: string, candidates: readonly string[], signal: AbortSignal, options: { pinned?: boolean; avoid?: string } = {}): Promise<ChannelLease> {
    signal.throwIfAborted();
    return new Promise<ChannelLease>((resolve, reject) => {
      const waiter: Waiter = {
        account,
        candidates: candidates.filter((name) => this.channels.has(name)),
        pinned: options.pinned ?? false,
        avoid: options.avoid,
        since: Date.now(),
        grant: (channel) => {
          if (signal.aborted) return false;
          signal.removeEventListener("abort", abort);
          const slot = new Slot(channel, account, this);
          this.slots.add(slot);
          resolve(slot);
          return true;
        },
      };
      const abort = () => {
        this.dropWaiter(waiter);
        reject(signal.reason);
      };
      signal.addEventListener("abort", abort, { once: true });
      const queue = this.waiting.get(account);
      if (queue) queue.push(waiter);
      else {
        this.waiting.set(account, [waiter]);
        this.turns.push(account);
      }
      this.dispatch();
    });
  }

  /**
   * A slot at once when nothing has to be weighed: no task of this runner waits, no other runner waits for any
   * of `candidates`, and every candidate this task could be served on has room in this runner's block. A pass
   * of the queue would grant exactly this then (an account alone in line takes any free slot, by the same
   * weights), with a promise, a queue entry and a fleet notice more per task. Undefined: `acquire` (the queue).
   */
  grantNow(account: string, candidates: readonly string[], options: { pinned?: boolean; avoid?: string } = {}): ChannelLease | undefined {
    // A pass of the queue under way with nobody in it is only announcing or giving back: nothing to jump.
    if (this.turns.length > 0) return undefined;
    const now = Date.now();
    const open: string[] = [];
    for (const name of candidates) {
      const block = this.blocks.get(name);
      if (block === undefined || (!options.pinned && this.cooling(name, now))) continue;
      if (this.fleet.anyWaitingElsewhere(name, now)) return undefined;
      // A candidate that could be served only after its block grows (a NATS write): the queue weighs it.
      if (block.room <= 0) {
        if (block.room + block.fleetFree(now) > 0) return undefined;
        continue;
      }
      open.push(name);
    }
    const channel = this.choose(open, options.avoid);
    if (channel === undefined) return undefined;
    const block = this.blocks.get(channel) as ChannelBlock;
    block.take(account);
    this.servedAt.set(`${channel}\n${account}`, now);
    const slot = new Slot(channel, account, this);
    this.slots.add(slot);
    this.growAhead(block, now);
    return slot;
  }

  /**
   * A block whose room fell to a step grows by a step before it is full, while nobody elsewhere waits for
   * the channel: its next tasks are then served at once too, instead of queueing behind the write. What goes
   * unused is given back as any block's room is (to a runner that waits, or after a lease).
   */
  private growAhead(block: ChannelBlock, now: number): void {
    const step = this.step(block, now);
    if (block.room > step || this.growingAhead.has(block.channel) || block.fleetFree(now) <= 0) return;
    this.growingAhead.add(block.channel);
    block
      .grow(step)
      // Debug only: the tasks that find the block full queue, and the queue's pass warns if the fleet stays out of reach.
      .catch((error: unknown) => this.log.debug({ err: error, channel: block.channel }, "could not grow this runner's block of a channel ahead of its tasks; they queue for it"))
      .finally(() => {
        this.growingAhead.delete(block.channel);
        // Tasks that queued meanwhile take the new room.
        if (this.turns.length > 0) this.dispatch();
      });
  }

  /** Takes a channel out of rotation for every runner, for its cool-down, after the upstream refused our key, quota or account. */
  sideline(name: string, why: string): void {
    const settings = this.channels.get(name);
    if (!settings) return;
    this.noteTransient(name, why);
    const now = Date.now();
    if (this.cooling(name, now)) return;
    this.sidelined.set(name, now + settings.coolDownMs);
    this.log.error({ channel: name, coolDownMs: settings.coolDownMs, why }, "channel out of rotation for the whole fleet: the upstream refused our key, quota or account");
    this.fleet.sideline(name, settings.coolDownMs, why).catch((error: unknown) => this.log.warn({ err: error, channel: name }, "could not tell the fleet a channel is out of rotation"));
  }

  /** A passing error (429, 5xx, timeout), kept for `reelay channels`. */
  noteTransient(name: string, why: string): void {
    if (!this.channels.has(name)) return;
    this.fleet.noteError(name, why).catch((error: unknown) => this.log.warn({ err: error, channel: name }, "could not record a channel's error"));
  }

  /** A clean-up after a finished task failed (`deleteAfterCopy`): it would repeat for every task, so one log line per channel and a count. */
  cleanupFailed(name: string, why: string): void {
    if (!this.channels.has(name)) return;
    if (!this.cleanupLogged.has(name)) this.log.warn({ channel: name, why }, "could not clean up after a task at the upstream (its copy stays there); logged once per channel, counted in `reelay channels`");
    this.cleanupLogged.add(name);
    this.fleet.cleanupFailed(name, why).catch((error: unknown) => this.log.warn({ err: error, channel: name }, "could not count a failed clean-up"));
  }

  /** Slots this runner's tasks hold (those of `account`'s tasks with it). */
  slotsHeld(account?: string): number {
    return account === undefined ? this.slots.size : [...this.blocks.values()].reduce((held, block) => held + block.heldHere(account), 0);
  }

  /** Stops refreshing; blocks go back to the fleet at once (a stopping runner hands its tasks back). */
  async close(): Promise<void> {
    if (this.tick) clearInterval(this.tick);
    this.slots.clear();
    await Promise.allSettled([...this.blocks.values()].map((block) => block.close()));
    this.fleet.stop();
  }

  /** A slot was given back (its `Slot` calls this): back in the block, for a waiter here or, when another runner waits, for the fleet. */
  slotReleased(slot: Slot): void {
    if (!this.slots.delete(slot)) return;
    this.blocks.get(slot.channel)?.give(slot.account);
    if (this.turns.length > 0 || this.fleet.anyWaitingElsewhere(slot.channel)) this.dispatch();
  }

  private cooling(name: string, now: number): boolean {
    return (this.sidelined.get(name) ?? 0) > now || (this.fleet.coolingUntil(name)?.until ?? 0) > now;
  }

  /** Refreshes blocks and waiting records a third of a lease old, gives back what went unused; looks for free slots (a dead runner's block ends unannounced). */
  private async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      const now = Date.now();
      await Promise.all([...this.blocks.values()].map((block) => block.beat(now)));
      for (const [key, at] of this.servedAt) if (at < now - SERVED_MEMORY_MS) this.servedAt.delete(key);
      await this.publishWaiting(now - this.fleet.leaseMs / 3);
    } catch (error) {
      this.log.warn({ err: error }, "could not reach the fleet's channel state; trying again shortly");
    } finally {
      this.beating = false;
    }
    if (this.turns.length > 0) this.dispatch();
  }

  /** Grants slots until no local waiter can be served now; one pass at a time, again if asked meanwhile. */
  private dispatch(): void {
    if (this.dispatching) {
      this.again = true;
      return;
    }
    this.dispatching = true;
    void (async () => {
      try {
        do {
          this.again = false;
          while (await this.serveOne());
          // A task that asked meanwhile (during a write) is served before anything is given back or announced.
          if (this.again) continue;
          await this.giveBack();
          if (this.again) continue;
          await this.publishWaiting();
        } while (this.again);
      } catch (error) {
        this.log.warn({ err: error }, "could not reach the fleet's channel state; trying again shortly");
        this.again = false; // the next beat tries again: no pass right after a failed one
      } finally {
        this.dispatching = false;
        // Asked during the last write of the pass: another pass, or that task would wait for the next ask.
        if (this.again) this.dispatch();
      }
    })();
  }

  /**
   * Serves the first account in turn with a waiter that may take a slot now; false when none may. A channel
   * whose block could not grow (the view was behind) is left out for the rest of the pass.
   */
  private async serveOne(): Promise<boolean> {
    const now = Date.now();
    const full = new Set<string>();
    const turns = new Map<string, ChannelTurns>();
    const turnsOf = (channel: string): ChannelTurns => {
      const known = turns.get(channel);
      if (known) return known;
      const fresh = channelTurns(this.blocks.get(channel) as ChannelBlock, this.fleet, this.localWaiting(channel), now);
      turns.set(channel, fresh);
      return fresh;
    };
    for (const account of [...this.turns]) {
      for (const waiter of [...(this.waiting.get(account) ?? [])]) {
        for (let channel = this.pick(waiter, now, full, turnsOf); channel !== undefined; channel = this.pick(waiter, now, full, turnsOf)) {
          const block = this.blocks.get(channel) as ChannelBlock;
          if (block.room <= 0 && !(await block.grow(this.step(block, now)))) {
            full.add(channel);
            continue;
          }
          // A shrink written meanwhile took the room back: look again.
          if (block.room <= 0) return true;
          const stillWaiting = this.waiting.get(account)?.includes(waiter) ?? false;
          this.servedAt.set(`${channel}\n${account}`, Date.now());
          this.dropWaiter(waiter);
          // Served: this account waits behind every other account of this runner for its next slot.
          const at = this.turns.indexOf(account);
          if (at >= 0) this.turns.push(...this.turns.splice(at, 1));
          if (!stillWaiting) return true;
          block.take(account);
          if (!waiter.grant(channel)) block.give(account);
          return true;
        }
      }
    }
    return false;
  }

  /** How many slots a full block asks for: an eighth of the channel (at most 64), one while another runner waits for it. */
  private step(block: ChannelBlock, now: number): number {
    return this.fleet.anyWaitingElsewhere(block.channel, now) ? 1 : Math.min(64, Math.ceil(block.max / 8));
  }

  /** Blocks with room while another runner waits for the channel give the room back (what is left after this runner's waiters were served). */
  private async giveBack(): Promise<void> {
    for (const block of this.blocks.values()) if (block.room > 0 && this.fleet.anyWaitingElsewhere(block.channel)) await block.giveBack();
  }

  /** Whether another runner holds an older waiting task of the same account for `channel` (it goes first: a runner with room would otherwise feed only its own). */
  private olderElsewhere(waiter: Waiter, channel: string, now: number): boolean {
    return this.fleet.waitingElsewhere(channel, now).some((record) => record.account === waiter.account && record.since < waiter.since);
  }

  /** A channel with a free slot for `waiter` whose turn it is, by weight; the avoided one only as a last resort. */
  private pick(waiter: Waiter, now: number, full: ReadonlySet<string>, turnsOf: (channel: string) => ChannelTurns): string | undefined {
    // A pinned task is already at that upstream (taken over from a runner that died): it needs only a free slot.
    const open = waiter.candidates.filter((name) => !full.has(name) && (waiter.pinned ? turnsOf(name).free > 0 : !this.cooling(name, now) && fairTurn(turnsOf(name), waiter.account, now) && !this.olderElsewhere(waiter, name, now)));
    return this.choose(open, waiter.avoid);
  }

  /** One of the `open` channels by weight, the avoided one only when it is the last open. */
  private choose(open: readonly string[], avoid: string | undefined): string | undefined {
    const preferred = open.filter((name) => name !== avoid);
    return byWeight(preferred.length > 0 ? preferred : open, (name) => this.channels.get(name)?.weight ?? 1, this.random);
  }

  /** This runner's waiting accounts on `channel`: how many tasks, since when the oldest waits, when this runner last served the account there. */
  private localWaiting(channel: string): Map<string, { count: number; since: number; servedAt: number }> {
    return waitingOn(channel, this.waiting, this.servedAt);
  }

  /** Tells the fleet what this runner holds waiting (see WaitingNotices). */
  private publishWaiting(staleBefore?: number): Promise<void> {
    const current = [...this.channels.keys()].flatMap((channel) => [...this.localWaiting(channel)].map(([account, waiting]) => ({ channel, account, ...waiting })));
    return this.notices.publish(current, staleBefore);
  }

  private dropWaiter(waiter: Waiter): void {
    const queue = this.waiting.get(waiter.account);
    if (!queue) return;
    const index = queue.indexOf(waiter);
    if (index >= 0) queue.splice(index, 1);
    if (queue.length === 0) {
      this.waiting.delete(waiter.account);
      this.turns.splice(this.turns.indexOf(waiter.account), 1);
    }
  }
}
