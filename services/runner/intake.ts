/**
 * How a runner shares its waiting set (the tasks it holds waiting for a channel slot, at most
 * `runner.maxWaitingTasks`) among accounts, so that one account's burst cannot fill every runner's set and
 * trap another account's later task in the queue behind it (issue 35; docs/decisions.md "Fair intake").
 *
 * While the set has room, every opening is hosted (the runner does not ask). Once it is full, each account's share is the set divided
 * among the accounts waiting here (the newcomer counted): an opening of an account below its share takes the
 * place of the newest waiting task of the account furthest over its share (that one goes back to the queue);
 * any other opening goes back to the queue at once. Pure.
 */
export type Admission =
  | { verdict: "handBack" }
  /** Host it after handing back a waiting task of one of `from` (furthest over its share first). */
  | { verdict: "replace"; from: readonly string[] };

const HAND_BACK: Admission = { verdict: "handBack" };

/** An account's share of a full waiting set of `maxWaiting` tasks among `accounts` accounts: at least one task. */
export function waitingShare(maxWaiting: number, accounts: number): number {
  return Math.max(1, Math.floor(maxWaiting / Math.max(1, accounts)));
}

/**
 * What a full runner (its waiting set, or its hosted tasks, at the bound) does with an opening of `account`,
 * given the tasks each account holds waiting here (`waiting`; accounts with none may be absent).
 */
export function admit(account: string, waiting: ReadonlyMap<string, number>, maxWaiting: number): Admission {
  const mine = waiting.get(account) ?? 0;
  let accounts = mine > 0 ? 0 : 1;
  for (const count of waiting.values()) if (count > 0) accounts++;
  const share = waitingShare(maxWaiting, accounts);
  if (mine >= share) return HAND_BACK;
  // Only an account over its share gives way: after the swap both are within it, so no two openings evict each other in turn.
  const over = [...waiting].filter(([, count]) => count > share).sort((a, b) => b[1] - a[1]);
  return over.length === 0 ? HAND_BACK : { verdict: "replace", from: over.map(([name]) => name) };
}

/** Shortest pause before a handed-back opening is delivered again. */
export const FIRST_HAND_BACK_MS = 500;

/**
 * How long an opening handed back although its account is below its share (no waiting task could make room)
 * stays out of the queue: 0.5 s, doubling with each delivery up to `maxMs`. New openings pass it meanwhile
 * (JetStream delivers a message whose delay has not run out to nobody).
 */
export function handBackDelayMs(deliveryCount: number, maxMs: number): number {
  const doublings = Math.min(30, Math.max(0, deliveryCount - 1));
  return Math.min(Math.max(FIRST_HAND_BACK_MS, maxMs), FIRST_HAND_BACK_MS * 2 ** doublings);
}

/** How often the pause of openings over their share is adjusted. */
const PACE_WINDOW_MS = 1_000;

/**
 * The pause of openings handed back because their account is at its share: a burst's tail waiting in the queue.
 * A tail of N openings paused C each comes back N / C times a second: too short a pause spins the queue, too
 * long a one leaves a runner with room and nothing due (the burst's last tasks sit out their pauses). So the
 * pause follows what this runner sees, once a second: when it handed back again more than twice as many
 * openings as it started, it grows (at most twofold), when fewer it shrinks (at most by half), between 0.5 s
 * and `maxMs`; and it is never longer than the runner takes to start a whole waiting set at its recent pace,
 * so that the set refills from openings coming back before it runs dry. At a real vendor's pace (minutes a
 * task) the first rule governs: about two deliveries again per task started. Each runner sees its part of the
 * tail and of the starts, so the fleet's ratio is the same.
 */
export class HandBackPace {
  private pauseMs = FIRST_HAND_BACK_MS;
  private handedBack = 0;
  private hosted = 0;
  /** Openings hosted per second: the last window's, or a tenth less each window while that is higher. */
  private hostRate = 0;
  private since: number;

  constructor(
    readonly maxMs: number,
    /** The waiting set's size: at `hostRate` it refills in `setSize / hostRate` seconds, the longest useful pause. */
    private readonly setSize: number,
    now: number,
  ) {
    this.since = now;
  }

  /** An opening was hosted (it will start, now or after its turn). */
  hostedOne(now: number): void {
    this.roll(now);
    this.hosted++;
  }

  /**
   * An opening over its account's share goes back now: its pause. Only one handed back before counts: every
   * opening is delivered once however long the tail, and a burst still being created would otherwise push
   * the pause up for openings that are due long before it ends.
   */
  handBack(now: number, again: boolean): number {
    this.roll(now);
    if (again) this.handedBack++;
    const refillMs = this.hostRate > 0 ? (1000 * this.setSize) / this.hostRate : this.maxMs;
    return Math.round(Math.max(FIRST_HAND_BACK_MS, Math.min(this.pauseMs, refillMs)));
  }

  /** Ends the window once a second has passed since it began, adjusting the pause by what it counted. */
  private roll(now: number): void {
    if (now - this.since < PACE_WINDOW_MS) return;
    this.hostRate = Math.max((1000 * this.hosted) / (now - this.since), 0.9 * this.hostRate);
    if (this.handedBack + this.hosted > 0) {
      const ratio = this.handedBack / Math.max(1, 2 * this.hosted);
      this.pauseMs = Math.round(Math.min(this.maxMs, Math.max(FIRST_HAND_BACK_MS, this.pauseMs * Math.min(2, Math.max(0.5, ratio)))));
    }
    this.handedBack = 0;
    this.hosted = 0;
    this.since = now;
  }
}

/** A hosted task as the intake sees it. */
export interface IntakeTask {
  readonly account: string;
  /** Its actor says whether it may go back to the queue now with nothing lost or done twice (waits for its first slot, no upstream call made). */
  readonly actor: { evictable(): boolean };
}

/**
 * The runner's hosted tasks per account in arrival order, for counting each account's waiting tasks and
 * finding the newest one that may be handed back.
 */
export class TasksByAccount<T extends IntakeTask> {
  private readonly accounts = new Map<string, Set<T>>();

  add(task: T): void {
    const tasks = this.accounts.get(task.account);
    if (tasks) tasks.add(task);
    else this.accounts.set(task.account, new Set([task]));
  }

  delete(task: T): void {
    const tasks = this.accounts.get(task.account);
    if (!tasks?.delete(task)) return;
    if (tasks.size === 0) this.accounts.delete(task.account);
  }

  /** Tasks per account held without a slot (`slotsOf`: the slots an account's tasks hold). */
  waiting(slotsOf: (account: string) => number): Map<string, number> {
    const waiting = new Map<string, number>();
    for (const [account, tasks] of this.accounts) {
      const count = tasks.size - slotsOf(account);
      if (count > 0) waiting.set(account, count);
    }
    return waiting;
  }

  /** The newest task of the first of `accounts` that has one that may be handed back now. */
  newestEvictable(accounts: readonly string[]): T | undefined {
    for (const account of accounts) {
      const tasks = [...(this.accounts.get(account) ?? [])];
      for (let i = tasks.length - 1; i >= 0; i--) {
        const task = tasks[i] as T;
        if (task.actor.evictable()) return task;
      }
    }
    return undefined;
  }
}
