import type { NatsConnection } from "@nats-io/transport-node";
import { createActor, type Actor } from "xstate";
import { SubmissionOutcome, type NewTaskEvent, type SubmitVideoTask, type TaskEvent } from "../../contracts/videoTask.ts";
import {
  decideTaskEvents,
  foldTaskEvents,
  isFinal,
  taskState,
  videoTaskMachine,
  type TaskObservation,
} from "../../machines/videoTask.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import type { Logger } from "../shared/log.ts";
import type { TaskLog } from "../shared/taskLog.ts";
import { ProviderRejection, type VideoProvider } from "./providers/types.ts";

export interface TaskActorDeps {
  nc: NatsConnection;
  log: Logger;
  taskLog: TaskLog;
  provider: VideoProvider;
  maxTaskMs: number;
  /** Resolves true once the runner is shutting down: no more appends from this point. */
  stopping: () => boolean;
}

/** How a hosted task ended for this runner. */
export type TaskActorExit = "final" | "steppedAside" | "stopped";

/**
 * Hosts one live task: rebuilds its XState actor from the log, then loops observe → decide → append →
 * apply until the task is final. Effects (upstream calls) happen only after the events that justify
 * them are in the log; a lost append race means another runner owns the task, and this one steps aside.
 */
export class TaskActor {
  private actor!: Actor<typeof videoTaskMachine>;
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
    const { provider } = this.deps;
    try {
      if (taskState(this.actor.getSnapshot()) === "unsubmitted") {
        await this.record([
          {
            type: "TaskSubmitted",
            data: {
              account: this.command.account,
              job: this.command.job,
              ignoredFields: this.command.ignoredFields,
              deadlineAt: new Date(Date.parse(this.command.receivedAt) + this.deps.maxTaskMs).toISOString(),
            },
          },
        ]);
      }
      if (!isFinal(this.actor.getSnapshot()) && this.actor.getSnapshot().context.providerTaskId === undefined) {
        await this.submitUpstream();
      }
      while (!isFinal(this.actor.getSnapshot())) {
        if (this.deps.stopping()) return "stopped";
        const providerTaskId = this.actor.getSnapshot().context.providerTaskId;
        if (providerTaskId !== undefined) {
          const report = await provider
            .poll({ taskId: this.taskId, job: this.command.job, providerTaskId })
            .catch((error: unknown) => {
              // A flaky upstream is not a failed task: keep polling until the deadline says otherwise.
              this.log.warn({ err: error }, "upstream poll failed; will retry");
              return undefined;
            });
          if (report) await this.observe({ kind: "upstreamReported", report });
        }
        await this.observe({ kind: "clock", now: new Date(), maxTaskMs: this.deps.maxTaskMs });
        if (!isFinal(this.actor.getSnapshot())) await sleep(provider.pollIntervalMs);
      }
      return "final";
    } catch (error) {
      if (error instanceof ConcurrencyError) return this.afterLostRace();
      throw error;
    } finally {
      this.actor.stop();
    }
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

  private async restore(redelivered: boolean): Promise<void> {
    // A first delivery has no history yet: skip the read; the append fence catches the rare surprise.
    const history = redelivered ? await this.deps.taskLog.read(this.taskId) : { events: [], lastSequence: 0 };
    this.lastSequence = history.lastSequence;
    this.actor = createActor(videoTaskMachine, { snapshot: foldTaskEvents(history.events) }).start();
  }

  private async observe(observation: TaskObservation): Promise<void> {
    await this.record(decideTaskEvents(this.actor.getSnapshot(), observation));
  }

  private async record(events: NewTaskEvent[]): Promise<void> {
    for (const event of events) {
      if (this.deps.stopping()) return;
      const version = this.actor.getSnapshot().context.version + 1;
      const appended = await this.deps.taskLog.append(this.taskId, event, version, this.lastSequence);
      this.lastSequence = appended.sequence;
      this.apply(appended.event);
    }
  }

  private apply(event: TaskEvent): void {
    this.actor.send(event);
    this.log.debug({ event: event.type, state: taskState(this.actor.getSnapshot()) }, "task event appended");
  }

  private async afterLostRace(): Promise<TaskActorExit> {
    const history = await this.deps.taskLog.read(this.taskId);
    const snapshot = foldTaskEvents(history.events);
    this.log.info({ state: taskState(snapshot) }, "another runner wrote to this task; stepping aside");
    return isFinal(snapshot) ? "final" : "steppedAside";
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
