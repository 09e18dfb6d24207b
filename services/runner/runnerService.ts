import type { JsMsg } from "@nats-io/jetstream";
import type { ReelayConfig } from "../../contracts/config.ts";
import { SubmitVideoTask } from "../../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import type { Logger } from "../shared/log.ts";
import { reportLiveTasks, runnerHeartbeat, tasksFinished, type LiveTask } from "../shared/metrics/metrics.ts";
import type { Nats } from "../shared/nats.ts";
import { pullLoop } from "../shared/pullLoop.ts";
import { TaskLog } from "../shared/taskLog.ts";
import { ProviderGate } from "./policy/providerGate.ts";
import type { VideoProvider } from "./providers/types.ts";
import { TaskActor } from "./taskActor.ts";
import { contextFromHeaders } from "../shared/tracing/natsTraceHeaders.ts";
import { inSpan, SpanKind } from "../shared/tracing/tracing.ts";

/**
 * Takes video jobs from the WORK queue and hosts a TaskActor for each until its task is final. A job
 * stays unacked (and heartbeated) while its task lives, so if this process dies JetStream hands the job
 * to another runner after the lease, which rebuilds the task from its log and carries on. A runner takes
 * only as many jobs as its providers have free slots, so a backlog spreads over every runner.
 */
export class RunnerService {
  private readonly held = new Map<number, JsMsg>();
  /** Live actors and the provider entry each runs on. */
  private readonly actors = new Map<TaskActor, string>();
  private stopReporting: (() => void) | undefined;
  /** Tasks hosted per provider, waiting for a slot or at the upstream. */
  private readonly hosted = new Map<string, number>();
  private readonly taskLog: TaskLog;
  private readonly shutdown = new AbortController();
  private readonly gates: ReadonlyMap<string, ProviderGate>;
  private loop: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly nats: Nats,
    private readonly config: ReelayConfig,
    private readonly providers: ReadonlyMap<string, VideoProvider>,
    private readonly log: Logger,
  ) {
    this.taskLog = new TaskLog(nats.js, nats.jsm);
    this.gates = new Map([...providers].map(([name, provider]) => [name, new ProviderGate(provider.policy)]));
  }

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.work.name, CONSUMERS.runners);
    // Heartbeats well inside the lease, so a live runner never loses a task it is working on.
    this.heartbeat = setInterval(() => this.beat(), Math.max(100, Math.floor(this.config.runner.leaseMs / 3)));
    runnerHeartbeat.setToCurrentTime();
    this.stopReporting = reportLiveTasks(() => this.liveTasks());
    void this.beatAfterReconnects();
    this.loop = pullLoop(consumer, {
      signal: this.shutdown.signal,
      room: () => this.room(),
      take: (msg) => this.host(msg),
      log: this.log,
      what: "runner",
    });
  }

  /** Stops taking work, lets live tasks stop at their next step, and hands their jobs back at once. */
  async stop(): Promise<void> {
    this.shutdown.abort();
    this.stopReporting?.();
    for (const actor of this.actors.keys()) actor.stop();
    if (this.heartbeat) clearInterval(this.heartbeat);
    await this.loop;
    await Promise.allSettled(this.running);
    for (const msg of this.held.values()) msg.nak();
    this.held.clear();
  }

  /** Jobs to fetch now: no more than the providers' free slots (with one provider, exactly its limit). */
  private room(): number {
    let free = 0;
    for (const [name, provider] of this.providers) free += Math.max(0, provider.policy.maxInFlight - (this.hosted.get(name) ?? 0));
    return Math.min(this.config.runner.maxConcurrentTasks - this.held.size, free, 256);
  }

  private beat(): void {
    for (const msg of this.held.values()) msg.working();
    runnerHeartbeat.setToCurrentTime();
  }

  private *liveTasks(): Iterable<LiveTask> {
    const now = Date.now();
    for (const [actor, provider] of this.actors) yield { provider, ...actor.progress(now) };
  }

  /** After a reconnect (a nats-server restart), held jobs are heartbeated at once, before their lease can run out. */
  private async beatAfterReconnects(): Promise<void> {
    for await (const status of this.nats.nc.status()) {
      if (this.shutdown.signal.aborted) return;
      if (status.type === "reconnect") this.beat();
    }
  }

  private host(msg: JsMsg): void {
    const parsed = SubmitVideoTask.safeParse(msg.json());
    if (!parsed.success) {
      this.log.error({ seq: msg.seq, issues: parsed.error.issues }, "unreadable work item; dropping it");
      msg.term("unreadable work item");
      return;
    }
    const { taskId } = parsed.data;
    if (this.held.has(taskId)) {
      // Redelivered while we still work on it (its lease ran out during a NATS outage): keep working,
      // now holding (and heartbeating) the newer delivery. A second actor would do the work twice.
      this.held.set(taskId, msg);
      msg.working();
      return;
    }
    const provider = this.providers.get(parsed.data.job.provider);
    const gate = this.gates.get(parsed.data.job.provider);
    if (!provider || !gate) {
      // Another runner may have this provider configured: hand the job back after a pause.
      this.log.error({ taskId, provider: parsed.data.job.provider }, "no such provider in this runner");
      msg.nak(5000);
      return;
    }
    this.held.set(taskId, msg);
    const providerName = parsed.data.job.provider;
    this.hosted.set(providerName, (this.hosted.get(providerName) ?? 0) + 1);
    const actor = new TaskActor(taskId, parsed.data, {
      nc: this.nats.nc,
      js: this.nats.js,
      videos: this.nats.videos,
      log: this.log,
      taskLog: this.taskLog,
      provider,
      gate,
      maxTaskMs: this.config.limits.maxTaskMs,
      maxResultBytes: this.config.runner.maxResultBytes,
      allowPrivateResultAddresses: this.config.runner.allowPrivateResultUrls,
      shutdown: this.shutdown.signal,
    });
    this.actors.set(actor, providerName);
    // The task's span continues the trace of the request that created it (its headers ride on the job).
    const span = { kind: SpanKind.CONSUMER, parent: contextFromHeaders(msg.headers), attributes: { "reelay.task_id": taskId, "reelay.provider": providerName } };
    const work = inSpan("video task", span, () => actor.run(msg.info.deliveryCount > 1))
      .then((exit) => {
        if (exit === "stopped") return; // stop() hands the job back
        if (exit === "final") {
          msg.ack();
          const outcome = actor.outcome();
          if (outcome) tasksFinished.inc({ provider: providerName, outcome });
        }
        else this.log.info({ taskId }, "left the task to its other runner");
        this.held.delete(taskId);
      })
      .catch((error: unknown) => {
        this.log.error({ err: error, taskId }, "task actor failed; retrying the task shortly");
        if (this.shutdown.signal.aborted) return;
        this.held.delete(taskId);
        msg.nak(1000);
      })
      .finally(() => {
        this.actors.delete(actor);
        this.hosted.set(providerName, (this.hosted.get(providerName) ?? 1) - 1);
        this.running.delete(work);
      });
    this.running.add(work);
  }
}
