import { setTimeout as sleep } from "node:timers/promises";
import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { SettleVideoTask } from "../../contracts/ledger.ts";
import { SubmissionOutcome, type NewTaskEvent, type SubmitVideoTask, type TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import {
  applyTaskEvent,
  decideTaskEvents,
  foldTaskEvents,
  isFinal,
  taskState,
  type TaskObservation,
  type VideoTaskSnapshot,
} from "../../machines/videoTask.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import type { Logger } from "../shared/log.ts";
import type { TaskLog } from "../shared/taskLog.ts";
import { ProviderRejection, type VideoProvider } from "./providers/types.ts";

export interface TaskActorDeps {
  nc: NatsConnection;
  js: JetStreamClient;
  log: Logger;
  taskLog: TaskLog;
  provider: VideoProvider;
  maxTaskMs: number;
  /** True once the runner is shutting down: no more appends from this point. */
  stopping: () => boolean;
}

/** How a hosted task ended for this runner. */
export type TaskActorExit = "final" | "steppedAside" | "stopped";

/**
 * The actor of one live task. Its state is the task machine's snapshot, rebuilt by folding the task's
 * log and advanced only with XState's pure transition, and it loops observe → decide → append → apply
 * until the task is final. Effects (upstream calls) happen only after the events that justify them are
 * in the log; a lost append race means another runner owns the task, and this one steps aside. Before it
 * lets go of a final task it queues the task's settlement, so a crash can never skip billing.
 */
export class TaskActor {
  private snapshot: VideoTaskSnapshot = foldTaskEvents([]);
  private lastSequence = 0;
  private readonly log: Logger;

  constructor(
    private readonly taskId: number,
    private readonly command: SubmitVideoTask,
    private readonly deps: TaskActorDeps,
  ) {
    this.log = deps.log.child({ taskId });
  }

  async run(redelivered: boolean): Promise<TaskActorExit> {
    await this.restore(redelivered);
    try {
      if (taskState(this.snapshot) === "unsubmitted") await this.record([this.submitted()]);
      if (!isFinal(this.snapshot) && this.snapshot.context.providerTaskId === undefined) await this.submitUpstream();
      while (!isFinal(this.snapshot)) {
        if (this.deps.stopping()) return "stopped";
        await this.pollOnce();
        if (!isFinal(this.snapshot)) await sleep(this.deps.provider.pollIntervalMs);
      }
      if (this.deps.stopping()) return "stopped";
      await this.queueSettlement();
      return "final";
    } catch (error) {
      if (error instanceof ConcurrencyError) return this.afterLostRace();
      throw error;
    }
  }

  private submitted(): NewTaskEvent {
    const deadlineAt = new Date(Date.parse(this.command.receivedAt) + this.deps.maxTaskMs).toISOString();
    const { account, job, ignoredFields } = this.command;
    return { type: "TaskSubmitted", data: { account, job, ignoredFields, deadlineAt } };
  }

  private async pollOnce(): Promise<void> {
    const providerTaskId = this.snapshot.context.providerTaskId;
    if (providerTaskId !== undefined) {
      const report = await this.deps.provider.poll({ taskId: this.taskId, job: this.command.job, providerTaskId }).catch((error: unknown) => {
        // A flaky upstream is not a failed task: keep polling until the deadline says otherwise.
        this.log.warn({ err: error }, "upstream poll failed; will retry");
        return undefined;
      });
      if (report) await this.observe({ kind: "upstreamReported", report });
    }
    await this.observe({ kind: "clock", now: new Date(), maxTaskMs: this.deps.maxTaskMs });
  }

  private async submitUpstream(): Promise<void> {
    const task = { taskId: this.taskId, job: this.command.job };
    let outcome: SubmissionOutcome;
    try {
      const { providerTaskId } = await this.deps.provider.submit(task);
      await this.observe({ kind: "upstreamAccepted", providerTaskId });
      outcome = { outcome: "accepted", taskId: this.taskId, providerTaskId };
    } catch (error) {
      if (!(error instanceof ProviderRejection)) throw error;
      await this.observe({ kind: "upstreamRejected", reason: error.message });
      outcome = { outcome: "rejected", taskId: this.taskId, reason: error.message };
    }
    if (this.deps.stopping()) return;
    if (this.command.notify) this.deps.nc.publish(this.command.notify, JSON.stringify(outcome));
  }

  /** Idempotent (msgID per task): a runner that restores a final task queues it again harmlessly. */
  private async queueSettlement(): Promise<void> {
    const outcome = this.snapshot.context.outcome;
    if (!outcome) throw new Error(`task ${this.taskId} is final without an outcome`);
    const { account, job } = this.command;
    const item: SettleVideoTask = {
      type: "SettleVideoTask",
      taskId: this.taskId,
      account,
      model: job.model,
      pricePerMillionTokens: job.pricePerMillionTokens,
      outcome,
    };
    await this.deps.js.publish(STREAMS.settlements.subjects[0], JSON.stringify(item), { msgID: `settle-task-${this.taskId}` });
  }

  private async restore(redelivered: boolean): Promise<void> {
    // A first delivery has no history yet: skip the read; the append fence catches the rare surprise.
    const history = redelivered ? await this.deps.taskLog.read(this.taskId) : { events: [], lastSequence: 0 };
    this.lastSequence = history.lastSequence;
    this.snapshot = foldTaskEvents(history.events);
  }

  private async observe(observation: TaskObservation): Promise<void> {
    await this.record(decideTaskEvents(this.snapshot, observation));
  }

  private async record(events: NewTaskEvent[]): Promise<void> {
    for (const event of events) {
      if (this.deps.stopping()) return;
      const version = this.snapshot.context.version + 1;
      const appended = await this.deps.taskLog.append(this.taskId, event, version, this.lastSequence);
      this.lastSequence = appended.sequence;
      this.apply(appended.event);
    }
  }

  private apply(event: TaskEvent): void {
    this.snapshot = applyTaskEvent(this.snapshot, event);
    this.log.debug({ event: event.type, state: taskState(this.snapshot) }, "task event appended");
  }

  private async afterLostRace(): Promise<TaskActorExit> {
    const history = await this.deps.taskLog.read(this.taskId);
    this.snapshot = foldTaskEvents(history.events);
    this.log.info({ state: taskState(this.snapshot) }, "another runner wrote to this task; stepping aside");
    if (!isFinal(this.snapshot)) return "steppedAside";
    // The other writer queues the settlement too; queueing it again is harmless and covers a lost ack.
    await this.queueSettlement();
    return "final";
  }
}

