import type { AccountLedger } from "../../billing/accountLedger.ts";
import { costMicros } from "../../billing/pricing.ts";
import { failpoint } from "../../shared/failpoints.ts";
import { tasksCreated } from "../../shared/metrics/metrics.ts";
import type { Logger } from "../../shared/log.ts";
import type { IdempotencyKeys } from "./idempotencyKeys.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";
import { JobNotQueuedError, type SubmittedTask, type TaskSubmitter } from "./taskSubmitter.ts";
import type { TaskViewReader } from "./taskViewReader.ts";

export interface CreateDeps {
  /** Where task ids come from (a block at a time: taskIds.ts). */
  taskIds: { take(): Promise<number> };
  ledger: AccountLedger;
  idempotency: IdempotencyKeys;
  submitter: TaskSubmitter;
  views: TaskViewReader;
  /** Whether the NATS connection is up: while it is down, creates answer 503 at once instead of timing out. */
  connection: { connected(): boolean };
  /** Whether a task came to be (its job queued or an event written): decides what a stale claim means. */
  taskExists(taskId: number): Promise<boolean>;
  /**
   * How long a claimed Idempotency-Key may stay between "claimed" and "queued" before a retry concludes
   * that its create died (an edge crash) and runs the create again.
   */
  claimTimeoutMs: number;
  log: Logger;
}

export interface CreatedTask extends SubmittedTask {
  status: "pending" | "running" | "success" | "failed";
}

/** Steps an idempotent create hooks into: right before the job is queued, and right after. */
export interface QueueHooks {
  /** Throws to stop before queueing (the reservation is then released). */
  beforeQueue(): void;
  /** The job is on the queue: the task exists. */
  queued(): void;
}

/** Reserves and queues task `taskId`; nothing stays reserved when it does not get queued. */
export async function createTask(
  deps: CreateDeps,
  account: string,
  request: NormalizedVideoRequest,
  taskId: number,
  hooks?: QueueHooks,
): Promise<CreatedTask> {
  const { job } = request;
  const amountMicros = costMicros([{ tokens: job.estimatedTokens, pricePerMillionTokens: job.pricePerMillionTokens }]);
  await deps.ledger.execute(account, { type: "reserve", taskId, amountMicros });
  // Crash tests stop an edge here: reserved (and claimed, with a key), not queued.
  failpoint("create:before-queue");
  const release = () => deps.ledger.execute(account, { type: "release", taskId, reason: "the job could not be queued" });
  try {
    hooks?.beforeQueue();
  } catch (error) {
    await release();
    throw error;
  }
  const queued = () => {
    tasksCreated.inc({ model: job.model });
    hooks?.queued();
  };
  try {
    return { ...(await deps.submitter.submit(account, taskId, request, queued)), status: "pending" };
  } catch (error) {
    // Any other failure comes after queueing: the task exists, and its runner settles or releases it.
    if (error instanceof JobNotQueuedError) await release();
    throw error;
  }
}
