import type { Logger } from "../../shared/log.ts";
import type { FleetChannels } from "./fleetChannels.ts";

/**
 * This runner's block of one channel's slots. Its tasks take and give back slots of the block in memory, with
 * no NATS message; the block itself changes by guarded writes on the channel's blocks record (FleetChannels
 * .writeBlock): it grows when its tasks need more than it holds, shrinks to what its tasks hold when another
 * runner waits for the channel, and gives back what stayed unused for a lease. Every write of it is also a
 * refresh (`until` = now + lease), and it is refreshed every third of a lease while it holds anything.
 */
export class ChannelBlock {
  /** Slots the fleet granted this runner, as last written (cut before a shrink is written: no task takes what goes back). */
  size = 0;
  inUse = 0;
  private readonly byAccount = new Map<string, number>();
  /** The most slots in use since the last refresh, and in each of the three refreshes (a lease) before: what the block holds above all of them went unused for a lease. */
  private peak = 0;
  private readonly peaks: number[] = [];
  private refreshedAt = 0;
  /** Writes of this block go one at a time (each expects the revision the one before left). */
  private writing: Promise<number> = Promise.resolve(0);

  constructor(
    readonly channel: string,
    readonly max: number,
    private readonly fleet: FleetChannels,
    private readonly log: Logger,
  ) {}

  get room(): number {
    return this.size - this.inUse;
  }

  /** What the live blocks of the fleet, this one included, leave of the channel's `maxInFlight`. */
  fleetFree(now: number): number {
    let taken = this.size;
    for (const [runner, block] of this.fleet.blocks(this.channel, now)) if (runner !== this.fleet.runner) taken += block.size;
    return Math.max(0, this.max - taken);
  }

  /** Slots of this block that `account`'s tasks hold. */
  heldHere(account: string): number {
    return this.byAccount.get(account) ?? 0;
  }

  /** Slots held per account on the channel: other runners' as of their last refresh, this runner's now. */
  heldBy(now: number): Map<string, number> {
    const held = new Map(this.byAccount);
    for (const [runner, block] of this.fleet.blocks(this.channel, now)) {
      if (runner === this.fleet.runner) continue;
      for (const [account, count] of Object.entries(block.byAccount)) held.set(account, (held.get(account) ?? 0) + count);
    }
    return held;
  }

  /** A task of `account` takes a slot of the block (the caller saw room). */
  take(account: string): void {
    this.inUse++;
    this.byAccount.set(account, (this.byAccount.get(account) ?? 0) + 1);
    this.peak = Math.max(this.peak, this.inUse);
  }

  give(account: string): void {
    this.inUse--;
    const left = (this.byAccount.get(account) ?? 1) - 1;
    if (left > 0) this.byAccount.set(account, left);
    else this.byAccount.delete(account);
  }

  /** Asks the fleet for `step` slots more (fewer when fewer are free); true when the block grew. */
  async grow(step: number): Promise<boolean> {
    const before = this.size;
    return (await this.write(() => this.size + step)) > before;
  }

  /** Gives back the slots no task of this runner holds (another runner waits for them). */
  async giveBack(): Promise<void> {
    if (this.room > 0) await this.write(() => this.inUse);
  }

  /** Refreshes the block when a third of a lease old; gives back what went unused for the last lease. */
  async beat(now: number): Promise<void> {
    if ((this.size === 0 && this.inUse === 0) || now - this.refreshedAt < this.fleet.leaseMs / 3) return;
    this.peaks.push(this.peak);
    if (this.peaks.length > 3) this.peaks.shift();
    const keep = this.peaks.length === 3 ? Math.max(...this.peaks, this.inUse) : this.size;
    this.peak = this.inUse;
    const written = await this.write(() => keep);
    if (written < this.inUse) this.log.error({ channel: this.channel, inUse: this.inUse, block: written }, "lost part of this runner's block (not refreshed within a lease: this process stalled or NATS was out of reach): the channel may have more tasks than maxInFlight until some of these end");
  }

  /** Removes the block from the fleet's record (a stopping runner hands its tasks back). */
  async close(): Promise<void> {
    this.inUse = 0;
    this.byAccount.clear();
    if (this.size > 0) await this.write(() => 0);
  }

  /** Writes the block at `target()` slots (never below what its tasks hold), cut to what the fleet leaves free; resolves with its new size. */
  private write(target: () => number): Promise<number> {
    const run = this.writing
      .catch(() => 0)
      .then(async () => {
        this.refreshedAt = Date.now();
        const size = await this.fleet.writeBlock(this.channel, this.max, (free) => {
          const wanted = Math.min(Math.max(target(), this.inUse), free);
          if (wanted < this.size) this.size = wanted;
          return { size: wanted, inUse: this.inUse, byAccount: Object.fromEntries(this.byAccount) };
        });
        this.size = size;
        return size;
      });
    this.writing = run;
    return run;
  }
}
