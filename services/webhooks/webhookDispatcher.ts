import { setTimeout as sleep } from "node:timers/promises";
import type { JsMsg } from "@nats-io/jetstream";
import { LRUCache } from "lru-cache";
import type { ReelayConfig } from "../../contracts/config.ts";
import type { TaskView } from "../../contracts/videoTask.ts";
import { WebhookJob } from "../../contracts/webhookJob.ts";
import { CONSUMERS, STREAMS, webhookJobSubject } from "../../infra/jetstreamLayout.ts";
import type { Logger } from "../shared/log.ts";
import { webhookDeliveries } from "../shared/metrics/metrics.ts";
import type { Nats } from "../shared/nats.ts";
import { pullLoop } from "../shared/pullLoop.ts";
import { TaskLog } from "../shared/taskLog.ts";
import { taskDataObject } from "../tasks/taskData.ts";
import { evolveTaskView } from "../tasks/taskView.ts";
import { backoffMs, deliverWebhook } from "./webhookDelivery.ts";
import { recordAttempt, withoutQuery } from "./webhookLog.ts";
import { webhookIdOf } from "./webhookOutbox.ts";
import { WebhookSecrets } from "./webhookSecrets.ts";

/** Jobs delivering (or waiting to retry) at once; more wait on the server. */
const MAX_HELD = 1000;

export interface WebhookDispatcherOptions {
  config: ReelayConfig["webhooks"];
  /** Where `video_url`s in bodies point (REELAY_PUBLIC_URL, or the edge's own address). */
  videoBaseUrl: string;
  leaseMs: number;
}

/**
 * Delivers the webhook jobs (stream WEBHOOK_JOBS, durable consumer `webhooks`: one job per status change of
 * a task with a callback URL, put there by the task-log reactors) to their callback URLs. A job stays
 * unacknowledged (heartbeated) until delivered or given up after `retryForMs`, so a killed dispatcher's
 * jobs are handed to the next one — at least once, with a stable `webhook-id` for receivers to drop
 * repeats. Deliveries of one task go one after the other, in order: a failing one holds back the task's
 * later ones, also across dispatchers (a job waits while an earlier job of its task is still queued).
 */
export class WebhookDispatcher {
  private readonly held = new Set<JsMsg>();
  private readonly chains = new Map<number, Promise<void>>();
  /** Task → the stream sequence of its last job finished here: its removal may still be on its way to the server. */
  private readonly finished = new LRUCache<number, number>({ max: 10_000 });
  private readonly secrets: WebhookSecrets;
  private readonly taskLog: TaskLog;
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    private readonly nats: Nats,
    private readonly options: WebhookDispatcherOptions,
    private readonly log: Logger,
  ) {
    this.secrets = new WebhookSecrets(nats.webhookSecrets);
    this.taskLog = new TaskLog(nats.js, nats.jsm);
  }

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.webhookJobs.name, CONSUMERS.webhooks);
    this.heartbeat = setInterval(() => {
      for (const msg of this.held) msg.working();
    }, Math.max(100, Math.floor(this.options.leaseMs / 3)));
    this.loop = pullLoop(consumer, {
      signal: this.stopping.signal,
      room: () => MAX_HELD - this.held.size,
      take: (msg) => this.take(msg),
      log: this.log,
      what: "webhooks",
    });
  }

  /** Stops taking jobs; those in hand go back to the server for the next dispatcher. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    await Promise.allSettled(this.chains.values());
    if (this.heartbeat) clearInterval(this.heartbeat);
  }

  private take(msg: JsMsg): void {
    const parsed = WebhookJob.safeParse(jsonOrUndefined(msg));
    if (!parsed.success) {
      // Only the task-log reactors write here; a job nobody can read would be handed out forever.
      this.log.error({ seq: msg.seq, err: parsed.error }, "unreadable webhook job: dropped");
      msg.term();
      return;
    }
    const job = parsed.data;
    this.held.add(msg);
    const previous = this.chains.get(job.taskId) ?? Promise.resolve();
    const next = previous
      .then(() => this.process(job, msg))
      .catch((error: unknown) => {
        // Reading the task failed (NATS trouble): the job comes back after a pause.
        this.log.warn({ err: error, taskId: job.taskId }, "webhook dispatch failed; the job will be handed out again");
        msg.nak(1000);
      })
      .finally(() => {
        this.held.delete(msg);
        if (this.chains.get(job.taskId) === next) this.chains.delete(job.taskId);
      });
    this.chains.set(job.taskId, next);
  }

  /**
   * One job. Jobs of a task are delivered in queue order across dispatchers: after a crash the server hands
   * out newer jobs at once while an older one waits out its lease, so a job with an earlier job of its task
   * still queued goes back to wait for it.
   */
  private async process(job: WebhookJob, msg: JsMsg): Promise<void> {
    if (await this.earlierJobQueued(job.taskId, msg.seq)) return msg.nak(1000);
    const outcome = await this.deliver(job);
    if (outcome === "stopped") return msg.nak();
    msg.ack();
    this.finished.set(job.taskId, msg.seq);
  }

  /** Whether a job of the task queued before `seq` is still waiting (delivered jobs leave the work queue). */
  private async earlierJobQueued(taskId: number, seq: number): Promise<boolean> {
    const first = await this.nats.jsm.direct.getMessage(STREAMS.webhookJobs.name, { next_by_subj: webhookJobSubject(taskId) });
    return first !== null && first.seq < seq && first.seq > (this.finished.get(taskId) ?? 0);
  }

  /** Delivers one status change, retrying with back-off until delivered or its retry period is over. */
  private async deliver(job: WebhookJob): Promise<"delivered" | "gave_up" | "stopped"> {
    const { taskId, account, callbackUrl } = job;
    const { events } = await this.taskLog.read(account, taskId);
    // The task as it was right after this change (later events may already be in the log).
    let view: TaskView | null = null;
    for (const e of events) if (e.meta.version <= job.version) view = evolveTaskView(view, e);
    if (!view) throw new Error(`task ${taskId} has no view at version ${job.version}`);
    const type = `video.task.${job.status}`;
    const body = JSON.stringify({ type, data: taskDataObject(view, this.options.videoBaseUrl) });
    const webhookId = webhookIdOf(job);
    const { timeoutMs, allowPrivateAddresses, retryForMs, firstBackoffMs, maxBackoffMs } = this.options.config;
    const giveUpAt = Date.parse(job.at) + retryForMs;
    for (let attempt = 1; ; attempt++) {
      if (this.stopping.signal.aborted) return "stopped";
      const secrets = await this.secrets.signingSecrets(account);
      const result = await deliverWebhook({ url: callbackUrl, id: webhookId, body, secrets }, { timeoutMs, allowPrivateAddresses });
      const pause = backoffMs(attempt, firstBackoffMs, maxBackoffMs);
      const givingUp = !result.delivered && Date.now() + pause > giveUpAt;
      webhookDeliveries.inc({ outcome: result.delivered ? "delivered" : givingUp ? "gave_up" : "failed" });
      recordAttempt(this.nats.js, account, {
        at: new Date().toISOString(),
        taskId,
        webhookId,
        type,
        target: withoutQuery(callbackUrl),
        attempt,
        outcome: result.delivered ? "delivered" : givingUp ? "gave_up" : "failed",
        ...(result.status !== undefined ? { status: result.status } : {}),
        ...(result.error !== undefined ? { error: result.error } : {}),
        durationMs: result.durationMs,
      });
      if (result.delivered) return "delivered";
      if (givingUp) {
        this.log.warn({ taskId, webhookId, attempts: attempt, target: withoutQuery(callbackUrl) }, "webhook given up after its retry period");
        return "gave_up";
      }
      await sleep(pause, undefined, { signal: this.stopping.signal }).catch(() => undefined);
    }
  }
}

function jsonOrUndefined(msg: JsMsg): unknown {
  try {
    return msg.json();
  } catch {
    return undefined;
  }
}
