import type { JetStreamClient } from "@nats-io/jetstream";
import type { WebhookJob } from "../../contracts/webhookJob.ts";
import { webhookJobSubject } from "../../infra/jetstreamLayout.ts";
import type { TaskLogEntry } from "../shared/taskLog.ts";
import { statusChangeOf } from "../tasks/statusChanges.ts";
import type { TaskDirectory } from "../tasks/taskDirectory.ts";

/**
 * Turns each status change of a task with a callback URL into a webhook job on WEBHOOK_JOBS, where the
 * dispatcher takes it: one of the reactors on the task log (services/projector/eventReactors.ts), so the
 * task log is read once for every reactor, and a task without a callback URL costs no message at all.
 * A webhook being retried for hours holds its job, never the task log.
 *
 * Jobs of a batch are published in log order on one connection, so they queue in that order. A batch handed
 * over again publishes them again: the msgID (the webhook-id) stores each once within the stream's duplicate
 * window; a repeat after it is delivered again under the same webhook-id, which receivers drop.
 */
export class WebhookOutbox {
  /** `directory` learns each task's owner from the batches before this one sees them. */
  constructor(private readonly js: JetStreamClient, private readonly directory: TaskDirectory) {}

  async handleEntries(entries: readonly TaskLogEntry[]): Promise<void> {
    const jobs: WebhookJob[] = [];
    for (const { event, account } of entries) {
      const status = statusChangeOf(event);
      if (status === undefined) continue;
      const taskId = event.meta.taskId;
      const owner = this.directory.known(taskId) ?? (await this.directory.ownerOf(account, taskId));
      if (!owner?.callbackUrl) continue;
      jobs.push({ taskId, version: event.meta.version, status, account: owner.account, callbackUrl: owner.callbackUrl, at: event.meta.at });
    }
    await Promise.all(
      jobs.map((job) => this.js.publish(webhookJobSubject(job.taskId), JSON.stringify(job), { msgID: webhookIdOf(job) })),
    );
  }
}

/** Stable per status change: the Standard Webhooks `webhook-id`, and the job's msgID. */
export const webhookIdOf = (job: Pick<WebhookJob, "taskId" | "version">): string => `task-${job.taskId}-v${job.version}`;
