import { setTimeout as sleep } from "node:timers/promises";
import type { JsMsg } from "@nats-io/jetstream";
import type { ReelayConfig } from "../../contracts/config.ts";
import { TaskEvent, type TaskView } from "../../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import type { Logger } from "../shared/log.ts";
import { webhookDeliveries } from "../shared/metrics/metrics.ts";
import type { Nats } from "../shared/nats.ts";
import { pullLoop } from "../shared/pullLoop.ts";
import { TaskLog } from "../shared/taskLog.ts";
import { statusChangeOf } from "../tasks/statusChanges.ts";
import { taskDataObject } from "../tasks/taskData.ts";
import { TaskDirectory } from "../tasks/taskDirectory.ts";
import { evolveTaskView } from "../tasks/taskView.ts";
import { backoffMs, deliverWebhook } from "./webhookDelivery.ts";
import { recordAttempt, withoutQuery } from "./webhookLog.ts";
import { WebhookSecrets } from "./webhookSecrets.ts";

/** Status events delivering (or waiting to retry) at once; more wait on the server, unacknowledged. */
const MAX_HELD = 1000;

export interface WebhookDispatcherOptions {
  config: ReelayConfig["webhooks"];
  /** Where `video_url`s in bodies point (REELAY_PUBLIC_URL, or the edge's own address). */
  videoBaseUrl: string;
  leaseMs: number;
}

/**
 * Delivers each task's status changes to its create's callback_url: a reactor on the task log through the
 * durable consumer `webhooks`. An event stays unacknowledged (heartbeated) until its webhook is delivered
 * or given up after `retryForMs`, so a killed dispatcher's work is redelivered to the next one — at least
 * once, with a stable `webhook-id` for receivers to drop repeats. Deliveries of one task go one after the
 * other, in order: a failing one holds back the task's later ones.
 */
export class WebhookDispatcher {
  private readonly held = new Set<JsMsg>();
  private readonly chains = new Map<number, Promise<void>>();
  private readonly tasks: TaskDirectory;
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
    this.tasks = new TaskDirectory(this.taskLog);
  }

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.tasks.name, CONSUMERS.webhooks);
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

  /** Stops taking events; those in hand go back to the server for the next dispatcher. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    await Promise.allSettled(this.chains.values());
    if (this.heartbeat) clearInterval(this.heartbeat);
  }

  private take(msg: JsMsg): void {
    let event: TaskEvent;
    try {
      event = TaskEvent.parse(msg.json());
    } catch (error) {
      // The task-view projection parks undecodable events for operators; here there is nothing to send.
      this.log.warn({ seq: msg.seq, err: error }, "undecodable task event: no webhook for it");
      msg.ack();
      return;
    }
    const taskId = event.meta.taskId;
    this.tasks.learn(event);
    const owner = this.tasks.known(taskId);
    if (owner && owner.callbackUrl === undefined) {
      msg.ack();
      return;
    }
    this.held.add(msg);
    const previous = this.chains.get(taskId) ?? Promise.resolve();
    const next = previous
      .then(() => this.process(event, msg))
      .catch((error: unknown) => {
        // Reading the task or writing progress failed (NATS trouble): the event comes back after a pause.
        this.log.warn({ err: error, taskId }, "webhook dispatch failed; the event will be delivered again");
        msg.nak(1000);
      })
      .finally(() => {
        this.held.delete(msg);
        if (this.chains.get(taskId) === next) this.chains.delete(taskId);
      });
    this.chains.set(taskId, next);
  }

  /**
   * One event of a task with a callback URL. Events are handled in version order across dispatchers:
   * after a crash the server delivers newer events at once while an older one waits out its lease, so an
   * event whose predecessor is not done yet goes back to wait for it.
   */
  private async process(event: TaskEvent, msg: JsMsg): Promise<void> {
    const taskId = event.meta.taskId;
    const { version } = event.meta;
    const done = await this.progressOf(taskId);
    if (done >= version) return msg.ack(); // handled before (a redelivery)
    if (done < version - 1) return msg.nak(1000); // an earlier event of this task is still on its way
    const status = statusChangeOf(event);
    if (status !== undefined) {
      const outcome = await this.deliver(event, status);
      if (outcome === "stopped") return msg.nak();
      if (outcome === "no_callback") return msg.ack();
    } else if (!(await this.tasks.ownerOf(taskId))?.callbackUrl) {
      return msg.ack();
    }
    await this.nats.webhookProgress.put(progressKey(taskId), String(version));
    msg.ack();
  }

  private async progressOf(taskId: number): Promise<number> {
    const entry = await this.nats.webhookProgress.get(progressKey(taskId));
    return entry && entry.operation === "PUT" ? Number(entry.string()) : 0;
  }

  /** Delivers one status change, retrying with back-off until delivered or its retry period is over. */
  private async deliver(event: TaskEvent, status: string): Promise<"delivered" | "gave_up" | "stopped" | "no_callback"> {
    const taskId = event.meta.taskId;
    const { events } = await this.taskLog.read(taskId);
    const submitted = events[0];
    if (submitted?.type !== "TaskSubmitted" || !submitted.data.callbackUrl) return "no_callback";
    const callbackUrl = submitted.data.callbackUrl;
    const account = submitted.data.account;
    // The task as it was right after this event (later events may already be in the log).
    let view: TaskView | null = null;
    for (const e of events) if (e.meta.version <= event.meta.version) view = evolveTaskView(view, e);
    if (!view) throw new Error(`task ${taskId} has no view at version ${event.meta.version}`);
    const type = `video.task.${status}`;
    const body = JSON.stringify({ type, data: taskDataObject(view, this.options.videoBaseUrl) });
    const webhookId = `task-${taskId}-v${event.meta.version}`;
    const { timeoutMs, allowPrivateAddresses, retryForMs, firstBackoffMs, maxBackoffMs } = this.options.config;
    const giveUpAt = Date.parse(event.meta.at) + retryForMs;
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

const progressKey = (taskId: number): string => `task_${taskId}`;
