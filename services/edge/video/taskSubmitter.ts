import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { randomBytes } from "node:crypto";
import { SubmissionOutcome, type SubmitVideoTask } from "../../../contracts/videoTask.ts";
import { workSubject } from "../../../infra/jetstreamLayout.ts";
import { UpstreamRejectedError } from "../../shared/errors.ts";
import { traceHeaders } from "../../shared/tracing/natsTraceHeaders.ts";
import type { Logger } from "../../shared/log.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";

/** The job never reached the queue: nothing will run, so its reservation must be released. */
export class JobNotQueuedError extends Error {}

export interface SubmittedTask {
  taskId: number;
  /** Absent when no runner answered within the wait: the task is queued and will still run. */
  providerTaskId?: string;
}

/**
 * Puts a job on the WORK queue and waits for the runner that takes it to say whether the upstream
 * accepted it, because the create response carries the upstream's task id and the spec answers an
 * upstream refusal with 400.
 */
export class TaskSubmitter {
  private readonly inbox = `_reelay.edge.${randomBytes(8).toString("hex")}`;
  private readonly waiting = new Map<string, (outcome: SubmissionOutcome) => void>();
  private subscription: Subscription | undefined;
  private ticket = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly waitMs: number,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.subscription = this.nc.subscribe(`${this.inbox}.*`, {
      callback: (error, msg) => {
        if (error) return this.log.warn({ err: error }, "submission outcome subscription error");
        const parsed = SubmissionOutcome.safeParse(msg.json());
        const ticket = msg.subject.slice(this.inbox.length + 1);
        if (parsed.success) this.waiting.get(ticket)?.(parsed.data);
      },
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
  }

  /** `queued` runs once the job is on the queue, before the wait for the runner's answer. */
  async submit(account: string, taskId: number, request: NormalizedVideoRequest, queued?: () => void): Promise<SubmittedTask> {
    const ticket = String(++this.ticket);
    let timer: NodeJS.Timeout | undefined;
    const outcome = new Promise<SubmissionOutcome | undefined>((resolve) => {
      this.waiting.set(ticket, resolve);
      timer = setTimeout(() => resolve(undefined), this.waitMs);
    });
    try {
      const command: SubmitVideoTask = {
        type: "SubmitVideoTask",
        taskId,
        account,
        job: request.job,
        ignoredFields: request.ignoredFields,
        receivedAt: new Date().toISOString(),
        ...(request.callbackUrl ? { callbackUrl: request.callbackUrl } : {}),
        notify: `${this.inbox}.${ticket}`,
      };
      // The msgID makes a publish retried after a lost ack queue the job once.
      const headers = traceHeaders();
      await this.js.publish(workSubject(taskId), JSON.stringify(command), { msgID: `task-${taskId}`, ...(headers ? { headers } : {}) }).catch((error: unknown) => {
        // The cause is kept: a NATS timeout here is infrastructure trouble (503), not a bug (500).
        throw new JobNotQueuedError(`task ${taskId} could not be queued: ${(error as Error).message}`, { cause: error });
      });
      queued?.();
      const result = await outcome;
      if (!result) return { taskId };
      if (result.outcome === "rejected") throw new UpstreamRejectedError(`upstream generator refused the task: ${result.reason}`);
      return { taskId, providerTaskId: result.providerTaskId };
    } finally {
      clearTimeout(timer);
      this.waiting.delete(ticket);
    }
  }
}
