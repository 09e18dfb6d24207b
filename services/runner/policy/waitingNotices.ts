import type { FleetChannels } from "./fleetChannels.ts";

/** How many of an account's tasks one runner holds waiting for one channel. */
export interface LocalWaiting {
  channel: string;
  account: string;
  count: number;
  since: number;
  servedAt: number;
}

/** The accounts of `waiting` (queues per account) waiting for `channel`: how many tasks, since when the oldest waits, when this runner last served the account there (`servedAt` per `channel\naccount`). Pure. */
export function waitingOn(channel: string, waiting: ReadonlyMap<string, ReadonlyArray<{ candidates: readonly string[]; since: number }>>, servedAt: ReadonlyMap<string, number>): Map<string, { count: number; since: number; servedAt: number }> {
  const accounts = new Map<string, { count: number; since: number; servedAt: number }>();
  for (const [account, queue] of waiting) {
    for (const waiter of queue) {
      if (!waiter.candidates.includes(channel)) continue;
      const known = accounts.get(account);
      accounts.set(account, { count: (known?.count ?? 0) + 1, since: Math.min(known?.since ?? waiter.since, waiter.since), servedAt: servedAt.get(`${channel}\n${account}`) ?? 0 });
    }
  }
  return accounts;
}

/**
 * What this runner tells the fleet about the tasks it holds waiting (the `chan.<c>.wait.<runner>.<account>`
 * records other runners rank turns by; a task served from its runner's block at once never waits, so a runner
 * whose blocks have room writes none): a record is written when its count or latest service changed, again
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
