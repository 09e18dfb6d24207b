import { lruOf } from "../shared/lruOf.ts";

/**
 * How long an account's deliveries are taken to last before one was timed: short, as a guess too long leaves the
 * account's slots idle while its jobs wait out turns spaced for it; one too short costs only early returns.
 */
const FIRST_GUESS_MS = 200;
/**
 * Turns come this much faster than the account's slots free up: a slot is seldom left idle for want of a job come
 * back, at the price of about one job sent back again per delivery.
 */
const TURNS_PER_FREE_SLOT = 2;
/** Weight of the newest delivery in an account's running average. */
const NEWEST_WEIGHT = 0.2;
/** Shortest wait: below it a job would come back before its slot could have turned over. */
const MIN_WAIT_MS = 100;
/**
 * Longest wait: an account whose queue is longer than this has its jobs come back at least this often (20,000
 * waiting jobs: 333 a second). Longer waits would come back more seldom, but a receiver that got faster would
 * leave slots idle until they did.
 */
const MAX_WAIT_MS = 60_000;

interface AccountPace {
  /** When (performance.now()) the account's last job sent back is due. */
  lastTurn: number;
  /** Running average of the account's delivery attempts, ms; none timed yet: FIRST_GUESS_MS, which the first replaces. */
  deliveryMs?: number;
}

/**
 * When a job over its account's in-flight share comes back: at its turn behind the account's other waiting jobs,
 * turns spaced by how long the account's deliveries take divided by its share (the pace its slots free up at),
 * twice as close. A flat wait brought every waiting job back every 2 s to be sent back again: 20,000 waiting jobs
 * were 10,000 deliveries a second for nothing. Turns bring each back about twice, about when a slot is free.
 * Kept per dispatcher, in memory; a receiver's pace is learned from its attempts within a few deliveries.
 */
export class AccountTurns {
  private readonly paces = lruOf<string, AccountPace>(100_000);
  /** Task → when (performance.now()) its job last sent back here is due. */
  private readonly taskTurns = lruOf<number, number>(100_000);

  constructor(private readonly share: number) {}

  /** The wait (ms) for a job of `account`'s task `taskId` over the account's share: the turn after the account's last one. */
  waitFor(account: string, taskId: number, now = performance.now()): number {
    const pace = this.paces.get(account) ?? { lastTurn: now };
    const turn = Math.min(Math.max(now, pace.lastTurn) + this.spacing(pace), now + MAX_WAIT_MS);
    this.paces.set(account, { ...pace, lastTurn: turn });
    this.taskTurns.set(taskId, turn);
    return Math.round(Math.max(MIN_WAIT_MS, turn - now));
  }

  /**
   * The wait (ms) of a job behind an earlier job of its task, taking no turn: until one turn after the earlier
   * job's, when that one was sent back here; else until the account's turns so far are over (it has one among them,
   * or it is held elsewhere: a dispatcher that died with it, whose lease runs out meanwhile).
   */
  behindEarlierJob(account: string, taskId: number, now = performance.now()): number {
    const pace = this.paces.get(account);
    const earlier = this.taskTurns.get(taskId);
    const until = earlier !== undefined && pace !== undefined ? earlier + this.spacing(pace) : (pace?.lastTurn ?? 0);
    return Math.round(Math.min(MAX_WAIT_MS, Math.max(0, until - now)));
  }

  private spacing(pace: AccountPace): number {
    return (pace.deliveryMs ?? FIRST_GUESS_MS) / this.share / TURNS_PER_FREE_SLOT;
  }

  /** A delivery attempt of `account` (delivered or not) took `ms`. */
  took(account: string, ms: number): void {
    const pace = this.paces.get(account);
    const deliveryMs = pace?.deliveryMs === undefined ? ms : pace.deliveryMs + NEWEST_WEIGHT * (ms - pace.deliveryMs);
    this.paces.set(account, { lastTurn: pace?.lastTurn ?? 0, deliveryMs });
  }
}
