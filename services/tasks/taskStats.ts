import type { KV } from "@nats-io/kv";
import { lruOf } from "../shared/lruOf.ts";
import { dayKey, DayUsage, HourStats, hourKey, StatusCounts } from "../../contracts/taskStats.ts";
import type { TaskEvent, TaskView } from "../../contracts/videoTask.ts";
import { isFinalStatus, statusAfter } from "../../machines/videoTask.ts";
import { costMicros } from "../billing/pricing.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { TaskLog, type TaskLogEntry } from "../shared/taskLog.ts";
import { WriteBehind } from "../shared/writeBehind.ts";

/** What the counters need to know of a task between its events. */
export interface TaskFacts {
  account: string;
  model: string;
  pricePerMillionTokens: number;
  status: TaskView["status"];
}

/** One counter change an event means: which document, which fields by how much. */
export type StatsChange =
  | { doc: "status"; delta: Partial<Record<TaskView["status"], number>> }
  | { doc: "hour"; at: string; delta: Partial<Record<"created" | "succeeded" | "failed" | "tokens" | "chargedMicros", number>> }
  | { doc: "day"; at: string; account: string; model: string; delta: Partial<Record<"created" | "succeeded" | "failed" | "tokens" | "chargedMicros", number>> };

/**
 * The counter changes one task event means, given what is known of its task before it, and what is known
 * after. Pure: the reactor applies the changes; replaying a log through it gives the same counters.
 */
export function statsOf(before: TaskFacts | undefined, event: TaskEvent): { facts: TaskFacts | undefined; changes: StatsChange[] } {
  const at = event.meta.at;
  if (event.type === "TaskSubmitted") {
    if (before) return { facts: before, changes: [] };
    const { account, job } = event.data;
    const facts: TaskFacts = { account, model: job.model, pricePerMillionTokens: job.pricePerMillionTokens, status: "pending" };
    return {
      facts,
      changes: [
        { doc: "status", delta: { pending: 1 } },
        { doc: "hour", at, delta: { created: 1 } },
        { doc: "day", at, account, model: job.model, delta: { created: 1 } },
      ],
    };
  }
  // Which event moves a task to which status is the task machine's table (machines/videoTask.ts).
  const status = before === undefined || isFinalStatus(before.status) ? undefined : statusAfter(before.status, event.type);
  if (!before || status === undefined || status === before.status) return { facts: before, changes: [] };
  const moved = { ...before, status };
  switch (status) {
    case "running":
      return { facts: moved, changes: [{ doc: "status", delta: { [before.status]: -1, running: 1 } }] };
    case "success": {
      // Only a success event leads here (the machine's table); the branch narrows its type.
      if (event.type !== "GenerationSucceeded") break;
      const tokens = event.data.totalTokens;
      const charged = costMicros([{ tokens, pricePerMillionTokens: before.pricePerMillionTokens }]);
      const delta = { succeeded: 1, tokens, chargedMicros: charged };
      return {
        facts: moved,
        changes: [
          { doc: "status", delta: { [before.status]: -1, success: 1 } },
          { doc: "hour", at, delta },
          { doc: "day", at, account: before.account, model: before.model, delta },
        ],
      };
    }
    case "failed":
      return {
        facts: moved,
        changes: [
          { doc: "status", delta: { [before.status]: -1, failed: 1 } },
          { doc: "hour", at, delta: { failed: 1 } },
          { doc: "day", at, account: before.account, model: before.model, delta: { failed: 1 } },
        ],
      };
  }
  return { facts: before, changes: [] };
}

const ZERO_OUTCOMES = { created: 0, succeeded: 0, failed: 0, tokens: 0, chargedMicros: 0 };

/** A counter document's key, how to read it, and the changes a batch brings it (each with its event's sequence). */
interface DocChanges {
  read: (raw: unknown) => { seq: number };
  deltas: Array<{ delta: Partial<Record<string, number>>; seq: number }>;
}

/**
 * Counter changes are held and written together: at most one write per document per period, however many
 * tasks pass (at 2,000 tasks/s, a write per batch cost two NATS messages per task), and STATS_QUIET_MS after
 * the last change when none follows. Counters are for operators' dashboards, where a second does not show.
 */
export const STATS_WRITE_BEHIND_MS = 1_000;
export const STATS_QUIET_MS = 250;

/**
 * Keeps `task_stats` from the task log, fed its batches in log order (one of the task read models, read by
 * one projector process at a time). The changes of a batch are held in memory and written behind, each
 * counter document once per STATS_WRITE_BEHIND_MS with the sum of its changes; `handleEntries` answers with
 * the promise of that write, and the batch is acknowledged only once it is kept (a crash before hands the
 * events over again). A task's facts are remembered as its events pass, and folded from its log when a task
 * is first met mid-way (after a restart). Each document carries the sequence it was last changed at, so a
 * redelivered event changes nothing twice.
 */
export class TaskStatsReactor {
  private readonly facts = lruOf<number, TaskFacts>(100_000);
  /** The counter documents as last written here, with their revisions: most changes need no read first. */
  private readonly docs = lruOf<string, { doc: Record<string, unknown>; revision: number }>(10_000);
  private readonly taskLog: TaskLog;
  /** Changes not written yet, by document. */
  private pending = new Map<string, DocChanges>();
  private readonly behind: WriteBehind;
  /** The last stream sequence taken: a batch handed over again (another reactor failed) is not counted twice. */
  private takenSeq = 0;

  constructor(
    private readonly nats: Nats,
    log: Logger,
  ) {
    this.taskLog = new TaskLog(nats.js, nats.jsm);
    this.behind = new WriteBehind(STATS_WRITE_BEHIND_MS, () => this.takePending(), log, "task counters", STATS_QUIET_MS);
  }

  /** One batch of the task log, in order (services/projector/eventReactors.ts); `durable` resolves once its changes are written. */
  async handleEntries(entries: readonly TaskLogEntry[]): Promise<{ durable: Promise<void> }> {
    const fresh = entries.filter(({ seq }) => seq > this.takenSeq);
    for (const { event, seq, account } of fresh) {
      const taskId = event.meta.taskId;
      const before = this.facts.get(taskId) ?? (event.type === "TaskSubmitted" ? undefined : await this.factsBefore(account, event));
      const { facts, changes } = statsOf(before, event);
      if (facts) this.facts.set(taskId, facts);
      for (const change of changes) {
        const { key, read } = documentOf(change);
        const doc = this.pending.get(key) ?? { read, deltas: [] };
        doc.deltas.push({ delta: change.delta, seq });
        this.pending.set(key, doc);
      }
    }
    this.takenSeq = Math.max(this.takenSeq, entries.at(-1)?.seq ?? 0);
    return { durable: this.pending.size === 0 ? this.behind.last : this.behind.soon() };
  }

  /** Writes what is pending now, and stops holding changes back (a write that keeps failing is then given up). */
  stop(): Promise<void> {
    return this.behind.stop();
  }

  /** The pending changes, taken now; written (again, until kept) by the write this answers. */
  private takePending(): () => Promise<void> {
    const docs = this.pending;
    this.pending = new Map();
    return async () => {
      await Promise.all([...docs].map(([key, doc]) => this.update(key, doc)));
    };
  }

  /** A task met mid-way: its facts folded from the events before this one. */
  private async factsBefore(account: string, event: TaskEvent): Promise<TaskFacts | undefined> {
    const { events } = await this.taskLog.read(account, event.meta.taskId);
    let facts: TaskFacts | undefined;
    for (const earlier of events) {
      if (earlier.meta.version >= event.meta.version) break;
      facts = statsOf(facts, earlier).facts;
    }
    return facts;
  }

  /**
   * Adds the changes of events the document does not hold yet (those past its `seq`) and moves its `seq`
   * to the last of them. The write is a compare-and-set on the revision this process last saw: when another
   * projector process wrote in between, the document is read again and the changes applied to it.
   */
  private async update(key: string, { read, deltas }: DocChanges): Promise<void> {
    const bucket = this.nats.taskStats;
    for (let attempt = 0; ; attempt++) {
      const known = attempt === 0 ? this.docs.get(key) : undefined;
      const current = known ?? (await load(bucket, key, read));
      const fresh = deltas.filter(({ seq }) => seq > (current.doc.seq as number));
      if (fresh.length === 0) return;
      const next: Record<string, unknown> = { ...current.doc, seq: fresh.at(-1)?.seq };
      for (const { delta } of fresh) for (const [field, by] of Object.entries(delta)) next[field] = (next[field] as number) + (by ?? 0);
      try {
        const value = JSON.stringify(next);
        const revision = current.revision === 0 ? await bucket.create(key, value) : await bucket.update(key, value, current.revision);
        this.docs.set(key, { doc: next, revision });
        return;
      } catch (error) {
        this.docs.delete(key);
        if (attempt >= 3) throw error;
      }
    }
  }
}

/** Which counter document a change goes to, and how that document reads when it does not exist yet. */
function documentOf(change: StatsChange): { key: string; read: (raw: unknown) => { seq: number } } {
  if (change.doc === "status") {
    return { key: "status", read: (raw) => StatusCounts.parse(raw ?? { pending: 0, running: 0, success: 0, failed: 0, seq: 0 }) };
  }
  if (change.doc === "hour") {
    const key = hourKey(change.at);
    return { key, read: (raw) => HourStats.parse(raw ?? { hour: key.slice(5), ...ZERO_OUTCOMES, seq: 0 }) };
  }
  const key = dayKey(change.at, change.account, change.model);
  const day = change.at.slice(0, 10);
  return { key, read: (raw) => DayUsage.parse(raw ?? { day, account: change.account, model: change.model, ...ZERO_OUTCOMES, seq: 0 }) };
}

async function load(bucket: KV, key: string, read: (raw: unknown) => { seq: number }): Promise<{ doc: Record<string, unknown>; revision: number }> {
  const entry = await bucket.get(key);
  const doc = read(entry?.operation === "PUT" ? entry.json() : undefined) as Record<string, unknown> & { seq: number };
  return { doc, revision: entry?.operation === "PUT" ? entry.revision : (entry?.revision ?? 0) };
}
