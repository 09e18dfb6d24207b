import type { ChannelBlock } from "./channelBlock.ts";
import type { FleetChannels } from "./fleetChannels.ts";

/** One channel as the fleet sees it at one moment: its free slots, who holds the others, who waits since when. */
export interface ChannelTurns {
  free: number;
  /** Slots held per account. */
  heldBy: ReadonlyMap<string, number>;
  /** Accounts with tasks waiting anywhere in the fleet, with when the oldest began to wait. */
  waitingSince: ReadonlyMap<string, number>;
  /** When each account last got a slot on the channel anywhere in the fleet (absent: not lately). */
  servedAt: ReadonlyMap<string, number>;
}

/**
 * Whether `account` may take one of a channel's free slots now. Waiting accounts are ranked by the slots they
 * hold (fewest first), then by their latest slot (least recently served first; never lately: first of all),
 * then by how long they have waited: with `free` slots, the first `free` accounts may claim. So a small
 * account's task goes before the next task of an account whose burst holds the channel or just had a slot,
 * whichever runner holds which task, accounts with waiting work take turns, and an account alone in the queue
 * takes every free slot. Pure.
 */
export function fairTurn(turns: ChannelTurns, account: string, now: number): boolean {
  if (turns.free <= 0) return false;
  // As many free slots as accounts waiting (this one counted): every one of them may claim, no ranking needed.
  if (turns.waitingSince.size + (turns.waitingSince.has(account) ? 0 : 1) <= turns.free) return true;
  const since = new Map(turns.waitingSince);
  if (!since.has(account)) since.set(account, now);
  const held = (name: string) => turns.heldBy.get(name) ?? 0;
  const served = (name: string) => turns.servedAt.get(name) ?? 0;
  const ranked = [...since.keys()].sort((a, b) => held(a) - held(b) || served(a) - served(b) || (since.get(a) ?? now) - (since.get(b) ?? now) || a.localeCompare(b));
  return ranked.indexOf(account) < turns.free;
}

/** A channel's turns from this runner's block of it, the fleet's view and this runner's own waiting accounts (`local`): free is the block's room and what the fleet leaves. */
export function channelTurns(block: ChannelBlock, fleet: FleetChannels, local: ReadonlyMap<string, { since: number; servedAt: number }>, now: number): ChannelTurns {
  const waitingSince = new Map<string, number>();
  const servedAt = new Map<string, number>();
  const wait = (account: string, since: number, served: number) => {
    waitingSince.set(account, Math.min(waitingSince.get(account) ?? since, since));
    if (served > 0) servedAt.set(account, Math.max(servedAt.get(account) ?? served, served));
  };
  for (const [account, { since, servedAt: served }] of local) wait(account, since, served);
  for (const record of fleet.waitingElsewhere(block.channel, now)) wait(record.account, record.since, record.servedAt);
  // Who holds what is only read when accounts compete for fewer free slots than they are (fairTurn): built then, once.
  let heldBy: ReadonlyMap<string, number> | undefined;
  return {
    free: block.room + block.fleetFree(now),
    get heldBy() {
      return (heldBy ??= block.heldBy(now));
    },
    waitingSince,
    servedAt,
  };
}

/** One of `choices` at random, in proportion to its weight (the first when there is one). */
export function byWeight(choices: readonly string[], weight: (name: string) => number, random: () => number): string | undefined {
  if (choices.length <= 1) return choices[0];
  let point = random() * choices.reduce((sum, name) => sum + weight(name), 0);
  for (const name of choices) {
    point -= weight(name);
    if (point < 0) return name;
  }
  return choices[choices.length - 1];
}
