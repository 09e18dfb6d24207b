import { setTimeout as sleep } from "node:timers/promises";
import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { SettleVideoTask } from "../../contracts/ledger.ts";
import { SubmissionOutcome, type SubmitVideoTask, type TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { isFinal } from "../../machines/videoTask.ts";
import { decideTask, evolveTask, foldTask, initialTaskState, taskOf, type TaskCommand, type TaskDeciderState } from "../../machines/videoTaskDecider.ts";
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
 * The actor of one live task. Its state is the task decider's, rebuilt by folding the task's log, and it
 * loops observe → decide → append → evolve until the task is final. Effects (upstream calls) happen only after the events that justify them are
 * in the log; a lost append race means another runner owns the task, and this one steps aside. Before it
 * lets go of a final task it queues the task's settlement, so a crash can never skip billing.
 */
export class TaskActor {
  private state: TaskDeciderState = initialTaskState();
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
      if (this.task.status === "unsubmitted") await this.execute(this.submitted());
      if (this.task.status === "pending" && this.task.providerTaskId === undefined) await this.submitUpstream();
      while (!isFinal(this.task)) {
        if (this.deps.stopping()) return "stopped";
        await this.pollOnce();
        if (!isFinal(this.task)) await sleep(this.deps.provider.pollIntervalMs);
      }
      if (this.deps.stopping()) return "stopped";
      await this.queueSettlement();
      return "final";
    } catch (error) {
      if (error instanceof ConcurrencyError) return this.afterLostRace();
      throw error;
    }
  }

  private get task() {
    return taskOf(this.state);
  }

  private submitted(): TaskCommand {
    const deadlineAt = new Date(Date.parse(this.command.receivedAt) + this.deps.maxTaskMs).toISOString();
    const { account, job, ignoredFields } = this.command;
    return { type: "SubmitTask", taskId: this.taskId, account, job, ignoredFields, deadlineAt };
  }

  private checkDeadline(): Promise<void> {
    return this.execute({ type: "CheckDeadline", now: new Date(), maxTaskMs: this.deps.maxTaskMs });
  }

  private async pollOnce(): Promise<void> {
    const providerTaskId = this.task.status === "unsubmitted" ? undefined : this.task.providerTaskId;
    if (providerTaskId !== undefined) {
      const report = await this.deps.provider.poll({ taskId: this.taskId, job: this.command.job, providerTaskId }).catch((error: unknown) => {
        // A flaky upstream is not a failed task: keep polling until the deadline says otherwise.
        this.log.warn({ err: error }, "upstream poll failed; will retry");
        return undefined;
      });
      if (report) await this.execute({ type: "RecordReport", report });
    }
    await this.checkDeadline();
  }

  /**
   * Submits until the upstream accepts or rejects the task, or its deadline passes: an upstream that
   * keeps failing (not refusing) is retried with growing pauses, and the deadline still ends the task
   * and frees its money whatever the upstream does.
   */
  private async submitUpstream(): Promise<void> {
    const task = { taskId: this.taskId, job: this.command.job };
    let outcome: SubmissionOutcome | undefined;
    for (let attempt = 0; outcome === undefined && !isFinal(this.task); attempt++) {
      if (this.deps.stopping()) return;
      try {
        const { providerTaskId } = await this.deps.provider.submit(task);
        await this.execute({ type: "RecordAcceptance", providerTaskId });
        outcome = { outcome: "accepted", taskId: this.taskId, providerTaskId };
      } catch (error) {
        if (error instanceof ConcurrencyError) throw error;
        if (error instanceof ProviderRejection) {
          await this.execute({ type: "RecordRejection", reason: error.message });
          outcome = { outcome: "rejected", taskId: this.taskId, reason: error.message };
        } else {
          this.log.warn({ err: error, attempt }, "upstream submit failed; will retry until the deadline");
          await this.checkDeadline();
          if (!isFinal(this.task)) await sleep(retryPause(attempt));
        }
      }
    }
    if (this.deps.stopping() || outcome === undefined) return;
    if (this.command.notify) this.deps.nc.publish(this.command.notify, JSON.stringify(outcome));
  }

  /** Idempotent (msgID per task): a runner that restores a final task queues it again harmlessly. */
  private async queueSettlement(): Promise<void> {
    const task = this.task;
    if (!isFinal(task)) throw new Error(`task ${this.taskId} is not final`);
    const { outcome } = task;
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
    this.state = foldTask(history.events);
  }

  /** Decide, then append each event at the next position of the task's log, then evolve. */
  private async execute(command: TaskCommand): Promise<void> {
    for (const event of decideTask(command, this.state)) {
      if (this.deps.stopping()) return;
      const appended = await this.deps.taskLog.append(this.taskId, event, this.state.version + 1, this.lastSequence);
      this.lastSequence = appended.sequence;
      this.apply(appended.event);
    }
  }

  private apply(event: TaskEvent): void {
    this.state = evolveTask(this.state, event);
    this.log.debug({ event: event.type, state: this.task.status }, "task event appended");
  }

  private async afterLostRace(): Promise<TaskActorExit> {
    const history = await this.deps.taskLog.read(this.taskId);
    this.state = foldTask(history.events);
    this.log.info({ state: this.task.status }, "another runner wrote to this task; stepping aside");
    if (!isFinal(this.task)) return "steppedAside";
    // The other writer queues the settlement too; queueing it again is harmless and covers a lost ack.
    await this.queueSettlement();
    return "final";
  }
}


/** Pauses between failed submits: 0.5 s doubling to 30 s, with jitter so runners don't retry in step. */
function retryPause(attempt: number): number {
  const ceiling = Math.min(30_000, 500 * 2 ** Math.min(attempt, 6));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}
