import { firstTaskEvent } from "../../../machines/videoTaskDecider.ts";
import { UpstreamRejectedError } from "../../shared/errors.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import type { TaskEventHub } from "../events/taskEventHub.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";

/** The task's first event was never written: nothing will run, so its reservation must be released. */
export class JobNotQueuedError extends Error {}

export interface SubmittedTask {
  taskId: number;
  /** Absent when no runner answered within the wait: the task is queued and will still run. */
  providerTaskId?: string;
}

/**
 * Starts a task by appending its first event (TaskSubmitted) to the task log, where runners take it
 * from, and waits for the upstream's answer in the edge's feed of that log, because the create response
 * carries the upstream's task id and the spec answers an upstream refusal with 400.
 */
export class TaskSubmitter {
  constructor(
    private readonly taskLog: TaskLog,
    private readonly hub: TaskEventHub,
    private readonly options: { waitMs: number; maxTaskMs: number },
  ) {}

  /** `queued` runs once the first event is written, before the wait for the runner's answer. */
  async submit(account: string, taskId: number, request: NormalizedVideoRequest, queued?: () => void): Promise<SubmittedTask> {
    const submitted = firstTaskEvent({
      taskId,
      account,
      job: request.job,
      ignoredFields: request.ignoredFields,
      deadlineAt: new Date(Date.now() + this.options.maxTaskMs).toISOString(),
      ...(request.callbackUrl ? { callbackUrl: request.callbackUrl } : {}),
    });
    const written = this.taskLog.appendFirst(taskId, submitted).then(
      () => queued?.(),
      async (error: unknown) => {
        // A lost acknowledgement: the event may be stored all the same, and then the task runs.
        if (await this.taskLog.first(taskId).catch(() => undefined)) return queued?.();
        // The cause is kept: a NATS timeout here is infrastructure trouble (503), not a bug (500).
        throw new JobNotQueuedError(`task ${taskId} could not be started: ${(error as Error).message}`, { cause: error });
      },
    );
    const result = await this.hub.submissionOutcome(taskId, this.options.waitMs, written);
    if (result?.outcome === "rejected") throw new UpstreamRejectedError(`upstream generator refused the task: ${result.reason}`);
    return { taskId, ...(result?.outcome === "accepted" ? { providerTaskId: result.providerTaskId } : {}) };
  }
}
