import type { JsMsg } from "@nats-io/jetstream";
import type { ReelayConfig } from "../../contracts/config.ts";
import { jobChannels, TaskEvent, type TaskSubmittedEvent } from "../../contracts/videoTask.ts";
import { CONSUMERS, OBJECT_STORES, STREAMS } from "../../infra/jetstreamLayout.ts";
import type { Logger } from "../shared/log.ts";
import { reportLiveTasks, runnerHeartbeat, tasksFinished, type LiveTask } from "../shared/metrics/metrics.ts";
import type { Nats } from "../shared/nats.ts";
import { pullLoop } from "../shared/pullLoop.ts";
import { ReferenceUsage } from "../shared/referenceUsage.ts";
import { TaskLog, taskMessageBody } from "../shared/taskLog.ts";
import type { ChannelPool } from "./policy/channelPool.ts";
import { HeldJob, HeldJobs } from "./heldJob.ts";
import { admit, FIRST_HAND_BACK_MS, HandBackPace, handBackDelayMs, TasksByAccount } from "./intake.ts";
import type { LiveTaskExit } from "../../machines/liveTaskTypes.ts";
import { LiveTaskActor, type LiveTaskHooks } from "./liveTask.ts";
import type { LiveTaskDeps } from "./liveTaskDeps.ts";
import { contextOfMessage } from "../shared/tracing/natsTraceHeaders.ts";
import { SpanKind, startPiecewiseSpan, type PiecewiseSpan } from "../shared/tracing/tracing.ts";

/** A task this runner hosts. */
interface HostedTask {
  taskId: number;
  account: string;
  actor: LiveTaskActor;
  span: PiecewiseSpan;
  /** The name of the task's uploaded reference (bucket `references`), if it has one: removed once the task is final. */
  upload: string | undefined;
}

/** How often per heartbeat period the runner looks for held jobs due for one. */
const BEAT_CHECKS_PER_PERIOD = 10;
/** Openings fetched at a time while the waiting set is full, looking for an account below its share. */
const FULL_BATCH = 32;

/**
 * Takes new tasks from the task log (the first events, which edges write: consumer `runners`) and hosts a
 * live task actor (liveTask.ts) for each until its task is final. A task's first event stays unacked (and heartbeated) while
 * the task lives, so if this process dies JetStream hands it to another runner after the lease, which
 * rebuilds the task from its log and carries on. A runner holds up to `runner.maxConcurrentTasks` tasks, of
 * which at most `runner.maxWaitingTasks` wait for a channel slot in the pool, still pending, where accounts
 * waiting anywhere in the fleet take turns. That waiting set is shared among accounts (intake.ts): once it is
 * full the runner keeps reading the queue, an account below its share takes the place of the newest waiting
 * task of the account furthest over it, and every other opening goes straight back to the queue for a while,
 * so a later account's task is never trapped behind another's burst, whichever runner holds what.
 */
export class RunnerService {
  private readonly held: HeldJobs;
  /** Live tasks by id. */
  private readonly hosted = new Map<number, HostedTask>();
  private readonly byAccount = new TasksByAccount<HostedTask>();
  private readonly pace: HandBackPace;
  /** What every actor gets (one object for all of them). */
  private readonly actorDeps: LiveTaskDeps;
  private stopReporting: (() => void) | undefined;
  private readonly taskLog: TaskLog;
  private readonly shutdown = new AbortController();
  private loop: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly referenceUsage: ReferenceUsage;

  constructor(
    private readonly nats: Nats,
    private readonly config: ReelayConfig,
    private readonly channels: ChannelPool,
    private readonly log: Logger,
    videoNameKey: Buffer,
  ) {
    this.held = new HeldJobs(config.runner.leaseMs);
    this.pace = new HandBackPace(Math.max(FIRST_HAND_BACK_MS, Math.floor(config.runner.leaseMs / 2)), config.runner.maxWaitingTasks, performance.now());
    this.taskLog = new TaskLog(nats.js, nats.jsm);
    this.referenceUsage = new ReferenceUsage(nats.referenceUsage);
    this.actorDeps = {
      videos: nats.videos,
      videoBucket: { nc: nats.nc, js: nats.js, jsm: nats.jsm, name: OBJECT_STORES.videos },
      videoNameKey,
      log,
      taskLog: this.taskLog,
      channels,
      maxTaskMs: config.limits.maxTaskMs,
      maxResultBytes: config.runner.maxResultBytes,
      allowPrivateResultAddresses: config.runner.allowPrivateResultUrls,
      shutdown: this.shutdown.signal,
    };
  }

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.events.name, CONSUMERS.runners);
    // Heartbeats well inside the lease, so a live runner never loses a task it is working on: each held job
    // every third of the lease, checked ten times as often so that thousands of held jobs are beaten a few at
    // a time (all at once, 8,000 parked jobs stalled this thread for tens of milliseconds every 10 s).
    this.heartbeat = setInterval(() => this.beat(), Math.max(50, Math.floor(this.held.beatEveryMs / BEAT_CHECKS_PER_PERIOD)));
    runnerHeartbeat.setToCurrentTime();
    this.stopReporting = reportLiveTasks(() => this.liveTasks());
    void this.beatAfterReconnects();
    this.loop = pullLoop(consumer, {
      signal: this.shutdown.signal,
      room: () => this.room(),
      take: (msg) => this.take(msg),
      log: this.log,
      what: "runner",
    });
  }

  /** Stops taking work, lets live tasks stop at their next step, and hands their jobs back at once. */
  async stop(): Promise<void> {
    this.shutdown.abort();
    this.stopReporting?.();
    for (const task of [...this.hosted.values()]) task.actor.stop();
    if (this.heartbeat) clearInterval(this.heartbeat);
    await this.loop;
    for (const job of this.held.values()) job.nak();
    this.held.clear();
  }

  /**
   * Jobs to fetch now: up to `maxConcurrentTasks` held, of which at most `maxWaitingTasks` wait for a slot (the
   * fleet serves waiting accounts in turn). Jobs held without a slot are counted from the moment they are taken,
   * so a fetch right after another cannot overshoot the bound before the new tasks reach the pool. Once full,
   * small batches still, for a task of an account below its share of the waiting set: the server delivers only
   * openings that are new or whose hand-back pause ran out, so a full runner whose queue holds nothing else
   * waits in the fetch and costs nothing more.
   */
  private room(): number {
    const spare = this.spare();
    return spare > 0 ? Math.min(spare, 256) : this.held.size > this.channels.slotsHeld() ? FULL_BATCH : 0;
  }

  /** Tasks this runner may still take within both bounds (0 or less: it is full). */
  private spare(): number {
    const { maxConcurrentTasks, maxWaitingTasks } = this.config.runner;
    const withoutSlot = this.held.size - this.channels.slotsHeld();
    return Math.min(maxConcurrentTasks - this.held.size, maxWaitingTasks - withoutSlot);
  }

  /** The upstream said there is news about one of its tasks (a callback): the task hosted here asks now. */
  poke(channel: string, providerTaskId: string): boolean {
    for (const task of this.hosted.values()) {
      const { actor } = task;
      if (actor.providerTaskId() === providerTaskId && actor.channel() === channel) {
        actor.poke();
        return true;
      }
    }
    return false;
  }

  /** Heartbeats the held jobs that are due (all of them with `all`). */
  private beat(all = false): void {
    this.held.beat(all);
    runnerHeartbeat.setToCurrentTime();
  }

  private *liveTasks(): Iterable<LiveTask> {
    const now = Date.now();
    for (const { actor } of this.hosted.values()) yield { provider: actor.channel(), ...actor.progress(now) };
  }

  /** After a reconnect (a nats-server restart), held jobs are heartbeated at once, before their lease can run out. */
  private async beatAfterReconnects(): Promise<void> {
    for await (const status of this.nats.nc.status()) {
      if (this.shutdown.signal.aborted) return;
      if (status.type === "reconnect") this.beat(true);
    }
  }

  private take(msg: JsMsg): void {
    const parsed = TaskEvent.safeParse(taskMessageBody(msg.json()));
    if (!parsed.success || parsed.data.type !== "TaskSubmitted") {
      // The projections dead-letter it; a runner has nothing to run.
      this.log.error({ seq: msg.seq, subject: msg.subject }, "a task opening without a readable TaskSubmitted; skipping it");
      msg.term("not a readable TaskSubmitted");
      return;
    }
    this.host(msg, parsed.data);
  }

  /** Whether this runner hosts `submitted` now, after handing back a waiting task of an account over its share if need be (intake.ts). */
  private admitted(msg: JsMsg, submitted: TaskSubmittedEvent): boolean {
    const { account } = submitted.data;
    if (this.spare() > 0) return true;
    const now = performance.now();
    const admission = admit(account, this.byAccount.waiting((name) => this.channels.slotsHeld(name)), this.config.runner.maxWaitingTasks);
    if (admission.verdict === "handBack") {
      msg.nak(this.pace.handBack(now, msg.info.deliveryCount > 1));
      return false;
    }
    const victim = this.byAccount.newestEvictable(admission.from);
    if (victim === undefined) {
      // Below its share, but no waiting task may go back (each made an upstream call): soon again.
      msg.nak(handBackDelayMs(msg.info.deliveryCount, this.pace.maxMs));
      return false;
    }
    // Its actor ends at once (no slot, no upstream call made): the job goes back to the queue for a while.
    victim.actor.stop();
    this.held.get(victim.taskId)?.nak(this.pace.handBack(now, false));
    this.held.delete(victim.taskId);
    this.log.debug({ taskId: victim.taskId, account: victim.account, for: account }, "handed a waiting task back to the queue: its account is over its share of the waiting set");
    return true;
  }

  /** Runs the task until it is final, holding `msg` (its opening) meanwhile. */
  private host(msg: JsMsg, submitted: TaskSubmittedEvent): void {
    const { taskId } = submitted.meta;
    if (this.held.has(taskId)) {
      // Redelivered while we still work on it (its lease ran out during a NATS outage): keep working,
      // now holding (and heartbeating) the newer delivery. A second actor would do the work twice.
      const job = HeldJob.of(this.nats.nc, msg);
      job.working();
      this.held.hold(taskId, job);
      return;
    }
    const candidates = jobChannels(submitted.data.job);
    if (!candidates.some((channel) => this.channels.has(channel))) {
      // Another runner may have these providers configured: hand the job back after a pause.
      this.log.error({ taskId, channels: candidates }, "none of the task's channels is configured in this runner");
      msg.nak(5000);
      return;
    }
    if (!this.admitted(msg, submitted)) return;
    this.pace.hostedOne(performance.now());
    this.held.hold(taskId, HeldJob.of(this.nats.nc, msg));
    const actor = new LiveTaskActor(submitted, this.actorDeps, this.hooks);
    // The task's span continues the trace of the request that created it (its headers ride on the job).
    const span = startPiecewiseSpan("video task", { kind: SpanKind.CONSUMER, parent: contextOfMessage(msg), attributes: { "reelay.task_id": taskId, "reelay.provider": candidates.join(",") } });
    const task: HostedTask = { taskId, account: submitted.data.account, actor, span, upload: submitted.data.job.uploadedReference };
    this.hosted.set(taskId, task);
    this.byAccount.add(task);
    try {
      // Delivered before, it may have been held (and run) elsewhere: its log says where it stands.
      actor.start(msg.info.deliveryCount > 1);
    } catch (error) {
      this.crashed(task, error);
    }
  }

  /** What every live task reports to (one object for all of them). */
  private readonly hooks: LiveTaskHooks = {
    exited: (actor, exit) => {
      const task = this.hosted.get(actor.taskId);
      if (task?.actor === actor) this.finish(task, exit);
    },
    crashed: (actor, error) => {
      const task = this.hosted.get(actor.taskId);
      if (task?.actor === actor) this.crashed(task, error);
    },
    run: (actor, call) => {
      const task = this.hosted.get(actor.taskId);
      return task?.actor === actor ? task.span.run(call) : call();
    },
  };

  /** The machine threw (a bug, not a fault it handles): the job goes back, to be tried again shortly. */
  private crashed(task: HostedTask, error: unknown): void {
    task.span.end(error as Error);
    this.log.error({ err: error, taskId: task.taskId }, "task actor failed; retrying the task shortly");
    this.hosted.delete(task.taskId);
    this.byAccount.delete(task);
    if (this.shutdown.signal.aborted) return;
    this.held.get(task.taskId)?.nak(1000);
    this.held.delete(task.taskId);
  }

  /**
   * A final task needs its uploaded reference no more: it leaves the store and the account's quota. Should
   * this fail (or this process die first), the store's max age removes it and the quota stops counting it then.
   */
  private async forgetUpload({ taskId, account }: HostedTask, name: string): Promise<void> {
    try {
      await this.nats.references.delete(name);
      await this.referenceUsage.release(account, name);
    } catch (error) {
      this.log.warn({ err: error, taskId, name }, "could not remove a finished task's uploaded reference; it ages out with its store");
    }
  }

  private finish(task: HostedTask, exit: LiveTaskExit): void {
    const { taskId, actor, span, upload } = task;
    span.end();
    this.hosted.delete(taskId);
    this.byAccount.delete(task);
    if (exit === "stopped") return; // stop() hands the job back
    if (exit === "final") {
      this.held.get(taskId)?.ack();
      const outcome = actor.outcome();
      if (outcome) tasksFinished.inc({ provider: actor.channel(), outcome });
      if (upload !== undefined) void this.forgetUpload(task, upload);
    } else this.log.info({ taskId }, "left the task to its other runner");
    this.held.delete(taskId);
  }
}
