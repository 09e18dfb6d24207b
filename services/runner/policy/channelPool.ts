import { setTimeout as sleep } from "node:timers/promises";
import type { ChannelReport } from "../../../contracts/runnerControl.ts";
import type { Logger } from "../../shared/log.ts";
import type { VideoProvider } from "../providers/types.ts";

/** One provider entry as a channel: its adapter, its share of new tasks, how long it sits out after refusing us. */
export interface ChannelSettings {
  /** The provider entry's kind (`ark`, `openai`, `local`), for reports. */
  kind: string;
  provider: VideoProvider;
  weight: number;
  coolDownMs: number;
}

/** A slot on one channel, held from submit until the task is final or handed over. */
export interface ChannelLease {
  channel: string;
  provider: VideoProvider;
  /** Waits for this submit's turn under the channel's `submitsPerSecond`. */
  submitTurn(signal: AbortSignal): Promise<void>;
  release(): void;
}

interface Channel {
  name: string;
  settings: ChannelSettings;
  inFlight: number;
  nextSubmitAt: number;
  sidelinedUntil: number;
  recentErrors: Array<{ at: string; message: string }>;
  cleanupFailures?: { count: number; last: { at: string; message: string } };
}

interface Waiter {
  account: string;
  candidates: readonly string[];
  /** A task already at one channel's upstream is polled there, in rotation or not. */
  pinned: boolean;
  /** Channels to use only when no other candidate has room (the one that just failed this task). */
  avoid: string | undefined;
  grant(channel: Channel): void;
}

const RECENT_ERRORS = 5;

/** A held slot: a class rather than closures, since every live task holds one (thousands at a time). */
class Slot implements ChannelLease {
  private released = false;

  constructor(
    private readonly on: Channel,
    private readonly pool: ChannelPool,
  ) {}

  get channel(): string {
    return this.on.name;
  }

  get provider(): VideoProvider {
    return this.on.settings.provider;
  }

  async submitTurn(signal: AbortSignal): Promise<void> {
    const { submitsPerSecond } = this.on.settings.provider.policy;
    if (submitsPerSecond <= 0) return;
    const now = Date.now();
    const at = Math.max(now, this.on.nextSubmitAt);
    this.on.nextSubmitAt = at + 1000 / submitsPerSecond;
    if (at > now) await sleep(at - now, undefined, { signal });
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.pool.slotReleased(this.on);
  }
}

/**
 * The runner's channels and their limits. A task asks for a slot on any of its model's channels: it gets one
 * on a channel in rotation with free capacity, chosen by weight among those; when all are full it waits,
 * still pending. Waiters are served round-robin by account, so one account's burst cannot starve another's
 * single task. A channel whose key, quota or account the upstream refused leaves the rotation for its
 * cool-down (one log line when it leaves, one when it comes back). Pure bookkeeping plus timers: no I/O.
 */
export class ChannelPool {
  private readonly channels = new Map<string, Channel>();
  /** Waiters per account; `turns` is the order accounts are served in (an account served goes to the back). */
  private readonly waiting = new Map<string, Waiter[]>();
  private readonly turns: string[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    settings: ReadonlyMap<string, ChannelSettings>,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
  ) {
    for (const [name, channel] of settings) this.channels.set(name, { name, settings: channel, inFlight: 0, nextSubmitAt: 0, sidelinedUntil: 0, recentErrors: [] });
  }

  has(channel: string): boolean {
    return this.channels.has(channel);
  }

  provider(channel: string): VideoProvider | undefined {
    return this.channels.get(channel)?.settings.provider;
  }

  /** Any of `candidates` that could take a task now or after a wait (it exists and is in rotation). */
  anyInRotation(candidates: readonly string[], now = Date.now()): boolean {
    return candidates.some((name) => {
      const channel = this.channels.get(name);
      return channel !== undefined && channel.sidelinedUntil <= now;
    });
  }

  /** Resolves with a slot on one of `candidates` once one is free; rejects when `signal` aborts. */
  acquire(account: string, candidates: readonly string[], signal: AbortSignal, options: { pinned?: boolean; avoid?: string } = {}): Promise<ChannelLease> {
    signal.throwIfAborted();
    return new Promise<ChannelLease>((resolve, reject) => {
      const waiter: Waiter = {
        account,
        candidates,
        pinned: options.pinned ?? false,
        avoid: options.avoid,
        grant: (channel) => {
          signal.removeEventListener("abort", abort);
          resolve(this.lease(channel));
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

  /** Takes a channel out of rotation for its cool-down, after the upstream refused our key, quota or account. */
  sideline(name: string, why: string): void {
    const channel = this.channels.get(name);
    if (!channel) return;
    this.noteError(channel, why);
    const now = Date.now();
    if (channel.sidelinedUntil > now) return;
    channel.sidelinedUntil = now + channel.settings.coolDownMs;
    this.log.error({ channel: name, coolDownMs: channel.settings.coolDownMs, why }, "channel out of rotation: the upstream refused our key, quota or account");
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.log.info({ channel: name }, "channel back in rotation after its cool-down");
      this.dispatch();
    }, channel.settings.coolDownMs);
    timer.unref();
    this.timers.add(timer);
  }

  /** A passing error (429, 5xx, timeout), kept for `reelay channels`. */
  noteTransient(name: string, why: string): void {
    const channel = this.channels.get(name);
    if (channel) this.noteError(channel, why);
  }

  /**
   * The clean-up after a finished task failed (the upstream's copy could not be deleted: `deleteAfterCopy`).
   * Nothing is wrong with the task, and the same reason would repeat for every task of the channel: one log
   * line per channel, with the reason, and a count in `reelay channels`.
   */
  cleanupFailed(name: string, why: string): void {
    const channel = this.channels.get(name);
    if (!channel) return;
    const last = { at: new Date().toISOString(), message: why };
    if (!channel.cleanupFailures) this.log.warn({ channel: name, why }, "could not clean up after a task at the upstream (its copy stays there); logged once per channel, counted in `reelay channels`");
    channel.cleanupFailures = { count: (channel.cleanupFailures?.count ?? 0) + 1, last };
  }

  report(now = Date.now()): ChannelReport[] {
    let waiting = 0;
    for (const queue of this.waiting.values()) waiting += queue.length;
    return [...this.channels.values()].map((channel) => ({
      channel: channel.name,
      kind: channel.settings.kind,
      state: channel.sidelinedUntil > now ? "cooling down" : "in rotation",
      inFlight: channel.inFlight,
      maxInFlight: channel.settings.provider.policy.maxInFlight,
      waiting,
      ...(channel.sidelinedUntil > now ? { backAt: new Date(channel.sidelinedUntil).toISOString() } : {}),
      recentErrors: [...channel.recentErrors],
      ...(channel.cleanupFailures ? { cleanupFailures: { ...channel.cleanupFailures } } : {}),
    }));
  }

  close(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  private noteError(channel: Channel, message: string): void {
    channel.recentErrors.push({ at: new Date().toISOString(), message });
    if (channel.recentErrors.length > RECENT_ERRORS) channel.recentErrors.shift();
  }

  private lease(channel: Channel): ChannelLease {
    channel.inFlight++;
    return new Slot(channel, this);
  }

  /** A slot was given back (its `Slot` calls this): a waiter may take it. */
  slotReleased(channel: Channel): void {
    channel.inFlight--;
    this.dispatch();
  }

  /** Grants free slots to waiters, one per account per round, until no waiter can be served. */
  private dispatch(): void {
    const now = Date.now();
    for (let served = true; served; ) {
      served = false;
      for (let i = 0; i < this.turns.length; i++) {
        const account = this.turns[i] as string;
        const queue = this.waiting.get(account) ?? [];
        const index = queue.findIndex((waiter) => this.pick(waiter, now) !== undefined);
        if (index < 0) continue;
        const [waiter] = queue.splice(index, 1) as [Waiter];
        const channel = this.pick(waiter, now) as Channel;
        // Served: this account waits behind every other account for its next slot.
        this.turns.splice(i, 1);
        if (queue.length > 0) this.turns.push(account);
        else this.waiting.delete(account);
        waiter.grant(channel);
        served = true;
        break;
      }
    }
  }

  /** A channel with room for `waiter`, by weight among those in rotation; the avoided one only as a last resort. */
  private pick(waiter: Waiter, now: number): Channel | undefined {
    const open = waiter.candidates.flatMap((name) => {
      const channel = this.channels.get(name);
      if (!channel || channel.inFlight >= channel.settings.provider.policy.maxInFlight) return [];
      return waiter.pinned || channel.sidelinedUntil <= now ? [channel] : [];
    });
    const preferred = open.filter((channel) => channel.name !== waiter.avoid);
    const choices = preferred.length > 0 ? preferred : open;
    if (choices.length <= 1) return choices[0];
    const total = choices.reduce((sum, channel) => sum + channel.settings.weight, 0);
    let point = this.random() * total;
    for (const channel of choices) {
      point -= channel.settings.weight;
      if (point < 0) return channel;
    }
    return choices[choices.length - 1];
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
