import type { LedgerEvent } from "../../contracts/ledger.ts";
import type { TaskEvent } from "../../contracts/videoTask.ts";
import { KEY_LIFETIME_MS } from "../tasks/idempotencyIndex.ts";
import { costMicros } from "./pricing.ts";

export interface ChargeAuditResult {
  finalTasks: number;
  problems: ChargeProblem[];
  /** Tasks that ended past the audit's point (see ChargeAudit's constructor): not checked. */
  settling: number;
}

/** A task whose money is not what its outcome says it must be. */
export interface ChargeProblem {
  taskId: number;
  account: string;
  problem: string;
}

interface TaskMoney {
  account: string;
  pricePerMillionTokens: number;
  outcome?: { succeeded: true; totalTokens: number } | { succeeded: false };
  /** It ended after the point the audit checks through: its settlement may still be on its way. */
  endedLate?: true;
  closings: Array<Extract<LedgerEvent, { type: "ReservationSettled" | "ReservationReleased" }>>;
}

/**
 * "Every success charged exactly once, every failure free", checked over the whole log (`reelay audit
 * charges`): a pure fold of every task event and every money event, in log order. A task still running holds
 * its reservation and is not checked; a final task must have exactly one closing of its reservation: a
 * settlement at its tokens' price for a success (what was charged plus what was past the account's credit
 * limit, uncollected), a release for a failure. And one task per Idempotency-Key: a second opening with an
 * account's key within the key's lifetime is a task its client paid for twice.
 */
export class ChargeAudit {
  private readonly tasks = new Map<number, TaskMoney>();
  /** Closings of tasks the log has no opening for (none can be written by reelay: each is a problem). */
  private readonly orphans: ChargeProblem[] = [];
  /** Each account's Idempotency-Keys (their hashes): the task the key made, and when. */
  private readonly keys = new Map<string, { taskId: number; at: number }>();
  private readonly secondTasks: ChargeProblem[] = [];

  /**
   * @param endedThrough the last log sequence whose task endings must be settled by now: the point the projector
   *   had acknowledged (it acknowledges an ending only once its settlement is written). A task that ended later,
   *   on a live system while the audit read the log, is counted as settling and not checked: its settlement is
   *   written up to 100 ms after its end. Unbounded by default (a log no one writes to any more).
   */
  constructor(private readonly endedThrough = Number.POSITIVE_INFINITY) {}

  /** `sequence`: the event's position in the log. */
  addTaskEvent(account: string, event: TaskEvent, sequence = 0): void {
    const taskId = event.meta.taskId;
    if (event.type === "TaskSubmitted") {
      this.tasks.set(taskId, { account, pricePerMillionTokens: event.data.job.pricePerMillionTokens, closings: [] });
      if (event.data.idempotency) this.addKey(account, event.data.idempotency.keyHash, taskId, Date.parse(event.meta.at));
      return;
    }
    const task = this.tasks.get(taskId);
    if (!task) return;
    if (event.type === "GenerationSucceeded") task.outcome = { succeeded: true, totalTokens: event.data.totalTokens };
    else if (event.type === "GenerationFailed") task.outcome = { succeeded: false };
    else return;
    if (sequence > this.endedThrough) task.endedLate = true;
  }

  addLedgerEvent(event: LedgerEvent): void {
    if (event.type !== "ReservationSettled" && event.type !== "ReservationReleased") return;
    const task = this.tasks.get(event.data.taskId);
    if (task) task.closings.push(event);
    else this.orphans.push({ taskId: event.data.taskId, account: event.meta.account, problem: `${event.type} of a task that has no opening` });
  }

  private addKey(account: string, keyHash: string, taskId: number, at: number): void {
    const name = `${account} ${keyHash}`;
    const first = this.keys.get(name);
    if (first !== undefined && at - first.at < KEY_LIFETIME_MS) {
      this.secondTasks.push({ taskId, account, problem: `a second task for the Idempotency-Key of task ${first.taskId}` });
      return;
    }
    this.keys.set(name, { taskId, at });
  }

  /** Final tasks checked so far, what is wrong, and how many tasks ended too recently to be checked. */
  result(): ChargeAuditResult {
    const problems = [...this.orphans, ...this.secondTasks];
    let finalTasks = 0;
    let settling = 0;
    for (const [taskId, task] of this.tasks) {
      if (task.endedLate) {
        settling += 1;
        continue;
      }
      const problem = problemOf(task);
      if (task.outcome) finalTasks += 1;
      if (problem) problems.push({ taskId, account: task.account, problem });
    }
    return { finalTasks, problems, settling };
  }
}

function problemOf(task: TaskMoney): string | undefined {
  const [closing, ...more] = task.closings;
  if (!task.outcome) return closing ? `its reservation was ${closing.type === "ReservationSettled" ? "settled" : "released"} before it ended` : undefined;
  if (!closing) return `${task.outcome.succeeded ? "succeeded" : "failed"} but its reservation was never closed`;
  if (more.length > 0) return `its reservation was closed ${task.closings.length} times`;
  if (!task.outcome.succeeded) return closing.type === "ReservationReleased" ? undefined : "failed but was charged";
  if (closing.type !== "ReservationSettled") return "succeeded but was not charged";
  const due = costMicros([{ tokens: task.outcome.totalTokens, pricePerMillionTokens: task.pricePerMillionTokens }]);
  // A cost past the account's credit limit is not charged but recorded as uncollected: together they are the price.
  const accounted = closing.data.costMicros + (closing.data.uncollectedMicros ?? 0);
  return accounted === due ? undefined : `charged ${closing.data.costMicros} µ¥ for ${task.outcome.totalTokens} tokens, which cost ${due} µ¥`;
}
