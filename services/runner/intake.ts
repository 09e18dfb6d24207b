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

/** First pause before a handed-back opening is delivered again. */
export const FIRST_HAND_BACK_MS = 500;

/**
 * How long a handed-back opening stays out of the queue: 0.5 s, doubling with each delivery up to half a lease.
 * New openings pass it meanwhile (JetStream delivers a message whose delay has not run out to nobody), and a
 * burst's tail handed back again and again costs fewer deliveries the longer it waits.
 */
export function handBackDelayMs(deliveryCount: number, leaseMs: number): number {
  const doublings = Math.min(30, Math.max(0, deliveryCount - 1));
  return Math.min(Math.max(FIRST_HAND_BACK_MS, Math.floor(leaseMs / 2)), FIRST_HAND_BACK_MS * 2 ** doublings);
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
