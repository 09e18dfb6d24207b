import type { JetStreamClient } from "@nats-io/jetstream";
import { lruOf } from "../shared/lruOf.ts";
import { versionBeforeForReactors, type TaskEvent } from "../../contracts/videoTask.ts";
import type { WebhookJob } from "../../contracts/webhookJob.ts";
import { SURELY_DEDUPLICATED_MS, webhookJobSubject } from "../../infra/jetstreamLayout.ts";
import type { TaskLog, TaskLogEntry } from "../shared/taskLog.ts";
import { statusChangeOf } from "../tasks/statusChanges.ts";
import type { TaskDirectory } from "../tasks/taskDirectory.ts";

/**
 * Turns each status change of a task with a callback URL into a webhook job on WEBHOOK_JOBS, where the
 * dispatcher takes it: one of the reactors on the task log (services/projector/eventReactors.ts), so the
 * task log is read once for every reactor, and a task without a callback URL costs no message at all.
 * A webhook being retried for hours holds its job, never the task log.
 *
 * Jobs of a task are queued in the order of its log, which the dispatcher keeps when it delivers them. The
 * reactors' consumer does not always deliver in that order: after a projector dies, its unacknowledged
 * events come back a lease later, while the task's newer events go to the next projector at once. So the
 * outbox remembers the last event of each task it saw, and a status change after a gap (a task first met
 * mid-way, or events another projector took) first queues the task's earlier status changes from its log;
 * the ones already queued are dropped by their msgID (the webhook-id) within the stream's duplicate window.
 * A repeat after that window is delivered again under the same webhook-id, which receivers drop.
 */
export class WebhookOutbox {
  /** Task (with a callback URL) → version of its last event seen here. */
  private readonly lastSeen = lruOf<number, number>(100_000);

  /** `directory` learns each task's owner from the batches before this one sees them. */
  constructor(
    private readonly js: JetStreamClient,
    private readonly directory: TaskDirectory,
    private readonly taskLog: TaskLog,
  ) {}

  async handleEntries(entries: readonly TaskLogEntry[]): Promise<void> {
    const jobs: WebhookJob[] = [];
    for (const { event, account } of entries) {
      const { taskId, version } = event.meta;
      // The reactors do not read the acceptance: the event after it says so (contracts/videoTask.ts).
      const before = versionBeforeForReactors(event);
      const status = statusChangeOf(event);
      if (status === undefined) {
        // No I/O for events that change no status: only the run of versions is kept.
        if (this.directory.known(taskId)?.callbackUrl !== undefined && this.lastSeen.get(taskId) === before) this.lastSeen.set(taskId, version);
        continue;
      }
      const known = this.directory.known(taskId);
      // A task known to have no callback URL has no webhooks: nothing to queue, no gap to fill, nothing to read.
      if (known !== undefined && known.callbackUrl === undefined) continue;
      const gap = before > 0 && this.lastSeen.get(taskId) !== before;
      let history: readonly TaskEvent[] = [];
      if (gap || known === undefined) {
        // One read of the task's log serves both: its owner (a task first met here) and the status changes missed.
        history = (await this.taskLog.read(account, taskId)).events;
        if (history[0]) this.directory.learn(history[0]);
      }
      const owner = this.directory.known(taskId);
      if (!owner?.callbackUrl) continue;
      const target = { account: owner.account, callbackUrl: owner.callbackUrl };
      if (gap) jobs.push(...earlierChanges(history, target, event));
      jobs.push(jobOf(event, status, target));
      this.lastSeen.set(taskId, version);
    }
    await Promise.all(
      jobs.map((job) => this.js.publish(webhookJobSubject(job.taskId), JSON.stringify(job), { msgID: webhookIdOf(job) })),
    );
  }

}

/**
 * The status changes before `event` in its task's log (`events`), recent enough to be deduplicated if already
 * queued: an earlier one is queued again (by its msgID) only while the server surely still holds its first job's
 * id; an older one was published long ago, since a reactor that dies with it unacknowledged hands it to the next
 * within a lease.
 */
function earlierChanges(events: readonly TaskEvent[], target: JobTarget, event: TaskEvent): WebhookJob[] {
  const since = Date.now() - SURELY_DEDUPLICATED_MS;
  const jobs: WebhookJob[] = [];
  for (const earlier of events) {
    if (earlier.meta.version >= event.meta.version) break;
    const status = statusChangeOf(earlier);
    if (status !== undefined && Date.parse(earlier.meta.at) > since) jobs.push(jobOf(earlier, status, target));
  }
  return jobs;
}

/** Where a task's webhooks go. */
type JobTarget = Pick<WebhookJob, "account" | "callbackUrl">;

function jobOf(event: TaskEvent, status: WebhookJob["status"], { account, callbackUrl }: JobTarget): WebhookJob {
  return { taskId: event.meta.taskId, version: event.meta.version, status, account, callbackUrl, at: event.meta.at };
}

/** Stable per status change: the Standard Webhooks `webhook-id`, and the job's msgID. */
export const webhookIdOf = (job: Pick<WebhookJob, "taskId" | "version">): string => `task-${job.taskId}-v${job.version}`;
