import type { LedgerEvent } from "../../contracts/ledger.ts";
import type { TaskEvent, UpstreamUsage } from "../../contracts/videoTask.ts";

/** Per model and channel: what customers were charged against what the upstream reported it used. */
export interface UpstreamAuditRow {
  model: string;
  channel: string;
  succeeded: number;
  failed: number;
  /** Tokens billed to customers (settled on the ledger) for the tasks the upstream reported usage for. */
  billedTokens: number;
  /** Tokens billed by design.md's estimate, for succeeded tasks without a report. */
  estimatedTokens: number;
  /** Everything charged for the row's tasks. */
  chargedMicros: number;
  /** Tokens the upstream reported, over the succeeded tasks that had a report. */
  upstreamTokens: number;
  /** Seconds of video the upstream bills us for (vendors that bill by the second). */
  upstreamSeconds: number;
  /** What the upstream's usage cost at the price configured when each task finished (`upstreamPrice`); 0 without one. */
  upstreamCostMicros: number;
  /** Succeeded tasks the upstream reported no usage for (billed by the estimate). */
  estimated: number;
  /** Tasks whose settled tokens differ from the upstream's report: each is a billing error to look into. */
  mismatched: number[];
  /** Failed tasks that were charged anyway (must be none). */
  chargedFailures: number[];
}

interface TaskFacts {
  model: string;
  channel: string;
  outcome?: "succeeded" | "failed";
  upstreamTokens?: number;
  upstreamUsage?: UpstreamUsage;
  settled?: { tokens: number; micros: number };
}

/**
 * Folds the task log and the ledger into the audit (pure: the CLI reads the streams). The channel is the
 * one that accepted the task (older logs without one: the model's first channel, which ran it then).
 */
export class UpstreamAudit {
  private readonly tasks = new Map<number, TaskFacts>();

  addTaskEvent(event: TaskEvent): void {
    const { taskId } = event.meta;
    const facts = this.tasks.get(taskId);
    switch (event.type) {
      case "TaskSubmitted":
        this.tasks.set(taskId, { ...facts, model: event.data.job.model, channel: facts?.channel ?? event.data.job.provider });
        break;
      case "UpstreamAccepted":
        if (facts && event.data.channel !== undefined) facts.channel = event.data.channel;
        break;
      case "GenerationSucceeded":
        if (facts) {
          facts.outcome = "succeeded";
          if (event.data.upstreamTokens !== undefined) facts.upstreamTokens = event.data.upstreamTokens;
          if (event.data.upstreamUsage !== undefined) facts.upstreamUsage = event.data.upstreamUsage;
        }
        break;
      case "GenerationFailed":
        if (facts) facts.outcome = "failed";
        break;
    }
  }

  addLedgerEvent(event: LedgerEvent): void {
    if (event.type !== "ReservationSettled") return;
    const facts = this.tasks.get(event.data.taskId);
    if (facts) facts.settled = { tokens: event.data.totalTokens, micros: event.data.costMicros };
  }

  rows(): UpstreamAuditRow[] {
    const rows = new Map<string, UpstreamAuditRow>();
    for (const [taskId, facts] of this.tasks) {
      if (facts.outcome === undefined) continue;
      const key = `${facts.model}\u0000${facts.channel}`;
      let row = rows.get(key);
      if (!row) {
        row = { model: facts.model, channel: facts.channel, succeeded: 0, failed: 0, billedTokens: 0, estimatedTokens: 0, chargedMicros: 0, upstreamTokens: 0, upstreamSeconds: 0, upstreamCostMicros: 0, estimated: 0, mismatched: [], chargedFailures: [] };
        rows.set(key, row);
      }
      row.chargedMicros += facts.settled?.micros ?? 0;
      if (facts.outcome === "failed") {
        row.failed += 1;
        if ((facts.settled?.micros ?? 0) > 0) row.chargedFailures.push(taskId);
        continue;
      }
      row.succeeded += 1;
      if (facts.upstreamUsage?.unit === "seconds") row.upstreamSeconds += facts.upstreamUsage.amount;
      row.upstreamCostMicros += facts.upstreamUsage?.costMicros ?? 0;
      if (facts.upstreamTokens === undefined) {
        row.estimated += 1;
        row.estimatedTokens += facts.settled?.tokens ?? 0;
      } else {
        row.upstreamTokens += facts.upstreamTokens;
        row.billedTokens += facts.settled?.tokens ?? 0;
        if (facts.settled && facts.settled.tokens !== facts.upstreamTokens) row.mismatched.push(taskId);
      }
    }
    return [...rows.values()].sort((a, b) => a.model.localeCompare(b.model) || a.channel.localeCompare(b.channel));
  }
}
