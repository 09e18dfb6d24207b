import type { JsMsg } from "@nats-io/jetstream";
import { lruOf } from "../shared/lruOf.ts";
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
import { AccountTurns } from "./accountTurns.ts";
import { EndpointPauses } from "./endpointPauses.ts";
import { recordAttempt, withoutQuery } from "./webhookLog.ts";
import { webhookIdOf } from "./webhookOutbox.ts";
import { WebhookSecrets } from "./webhookSecrets.ts";

/** A job whose task still has an earlier job queued looks again after about this long. */
const ORDER_WAIT_MS = 1_000;

/** A wait spread over +0–25%, so jobs sent back together do not all come back at the same moment. */
const spread = (ms: number): number => Math.round(ms * (1 + Math.random() / 4));

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
 *
 * Fair across accounts: a dispatcher holds at most `maxInFlight` jobs, and at most `maxInFlightPerAccount` of
 * one account; a job over that goes back to the server until its turn (AccountTurns). A failed attempt does not
 * keep its slot while it backs off: the job goes back to the server with the back-off as its redelivery delay.
 * An endpoint that keeps failing is paused (EndpointPauses), and its jobs wait on the server without attempts.
 * Waiting jobs do not hold up other accounts' jobs: the consumer has no bound on pending jobs (the layout's
 * `webhookConsumer`).
 */
export class WebhookDispatcher {
  private readonly held = new Set<JsMsg>();
  /** Account → jobs held for it. */
  private readonly heldPerAccount = new Map<string, number>();
  /** Webhook id → attempts made by this dispatcher (a restarted one counts, and backs off, from 1 again). */
  private readonly attempts = lruOf<string, number>(100_000);
  private readonly pauses: EndpointPauses;
  private readonly turns: AccountTurns;
  private readonly chains = new Map<number, Promise<void>>();
  /** Task → the stream sequence of its last job finished here: its removal may still be on its way to the server. */
  private readonly finished = lruOf<number, number>(10_000);
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
    this.pauses = new EndpointPauses(options.config);
    this.turns = new AccountTurns(options.config.maxInFlightPerAccount);
  }

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.webhookJobs.name, CONSUMERS.webhooks);
    this.heartbeat = setInterval(() => {
      for (const msg of this.held) msg.working();
    }, Math.max(100, Math.floor(this.options.leaseMs / 3)));
    this.loop = pullLoop(consumer, {
      signal: this.stopping.signal,
      room: () => this.options.config.maxInFlight - this.held.size,
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
    const paused = this.pauses.pausedFor(job.callbackUrl);
    if (paused > 0) return msg.nak(spread(paused));
    const accountHeld = this.heldPerAccount.get(job.account) ?? 0;
    if (accountHeld >= this.options.config.maxInFlightPerAccount) return msg.nak(this.turns.waitFor(job.account, job.taskId));
    this.heldPerAccount.set(job.account, accountHeld + 1);
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
        const left = (this.heldPerAccount.get(job.account) ?? 1) - 1;
        if (left > 0) this.heldPerAccount.set(job.account, left);
        else this.heldPerAccount.delete(job.account);
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
    // The earlier job may be waiting for its turn: this one comes back after it.
    if (await this.earlierJobQueued(job.taskId, msg.seq)) return msg.nak(Math.max(spread(ORDER_WAIT_MS), this.turns.behindEarlierJob(job.account, job.taskId)));
    const outcome = await this.attempt(job);
    if (outcome === "stopped") return msg.nak();
    if (typeof outcome === "number") return msg.nak(outcome);
    msg.ack();
    this.finished.set(job.taskId, msg.seq);
  }

  /**
   * Whether a job of the task queued before `seq` is still waiting (delivered jobs leave the work queue). Jobs
   * finished here are skipped by sequence, not by what the queue says: an ack is not awaited, and the server may
   * answer the look-up before it has removed the job; a check that looked only at the first job left would then
   * take the finished job for the earliest and miss a waiting one after it.
   */
  private async earlierJobQueued(taskId: number, seq: number): Promise<boolean> {
    const after = this.finished.get(taskId) ?? 0;
    const first = await this.nats.jsm.direct.getMessage(STREAMS.webhookJobs.name, { next_by_subj: webhookJobSubject(taskId), seq: after + 1 });
    return first !== null && first.seq < seq;
  }

  /**
   * One attempt at delivering a status change: "delivered", "gave_up" once its retry period is over, or
   * the back-off (ms) after which the job is to be offered again.
   */
  private async attempt(job: WebhookJob): Promise<"delivered" | "gave_up" | "stopped" | number> {
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
    if (this.stopping.signal.aborted) return "stopped";
    const attempt = (this.attempts.get(webhookId) ?? 0) + 1;
    this.attempts.set(webhookId, attempt);
    const secrets = await this.secrets.signingSecrets(account);
    const result = await deliverWebhook({ url: callbackUrl, id: webhookId, body, secrets }, { timeoutMs, allowPrivateAddresses });
    this.turns.took(account, result.durationMs);
    if (result.delivered) this.pauses.delivered(callbackUrl);
    else this.pauses.failed(callbackUrl);
    const pause = backoffMs(attempt, firstBackoffMs, maxBackoffMs);
    const givingUp = !result.delivered && Date.now() + pause > giveUpAt;
    const outcome = result.delivered ? "delivered" : givingUp ? "gave_up" : "failed";
    webhookDeliveries.inc({ outcome });
    recordAttempt(this.nats.js, account, {
      at: new Date().toISOString(),
      taskId,
      webhookId,
      type,
      target: withoutQuery(callbackUrl),
      attempt,
      outcome,
      ...(result.status !== undefined ? { status: result.status } : {}),
      ...(result.error !== undefined ? { error: result.error } : {}),
      durationMs: result.durationMs,
    });
    if (outcome === "failed") return pause;
    this.attempts.delete(webhookId);
    if (outcome === "gave_up") this.log.warn({ taskId, webhookId, attempts: attempt, target: withoutQuery(callbackUrl) }, "webhook given up after its retry period");
    return outcome;
  }
}

function jsonOrUndefined(msg: JsMsg): unknown {
  try {
    return msg.json();
  } catch {
    return undefined;
  }
}
