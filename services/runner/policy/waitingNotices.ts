import type { FleetChannels } from "./fleetChannels.ts";

/** How many of an account's tasks one runner holds waiting for one channel. */
export interface LocalWaiting {
  channel: string;
  account: string;
  count: number;
  since: number;
  servedAt: number;
}

/**
 * What this runner tells the fleet about the tasks it holds waiting (the `chan.<c>.wait.<runner>.<account>`
 * records other runners rank turns by): a record is written when its count or latest service changed, again
 * when it is a third of a lease old (it stops counting one lease after it was written), and once with 0 when
 * the account has nothing waiting here any more.
 */
export class WaitingNotices {
  private readonly published = new Map<string, { count: number; servedAt: number; at: number }>();

  constructor(private readonly fleet: FleetChannels) {}

  async publish(current: readonly LocalWaiting[], staleBefore?: number): Promise<void> {
    const now = new Map(current.map((waiting) => [`${waiting.channel}\n${waiting.account}`, waiting]));
    for (const key of this.published.keys()) {
      if (now.has(key)) continue;
      const [channel = "", account = ""] = key.split("\n");
      now.set(key, { channel, account, count: 0, since: 0, servedAt: 0 });
    }
    for (const [key, { channel, account, count, since, servedAt }] of now) {
      const last = this.published.get(key);
      const due = last === undefined || last.count !== count || last.servedAt !== servedAt || (count > 0 && staleBefore !== undefined && last.at <= staleBefore);
      if (!due) continue;
      await this.fleet.setWaiting(channel, account, { count, since, servedAt });
      if (count === 0) this.published.delete(key);
      else this.published.set(key, { count, servedAt, at: Date.now() });
    }
  }
}
