import type { JetStreamClient } from "@nats-io/jetstream";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";
import type { AccountLedger } from "../../billing/accountLedger.ts";
import { costMicros } from "../../billing/pricing.ts";
import type { IdempotencyKeys } from "./idempotencyKeys.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";
import { JobNotQueuedError, type SubmittedTask, type TaskSubmitter } from "./taskSubmitter.ts";
import type { TaskViewReader } from "./taskViewReader.ts";

export interface CreateDeps {
  js: JetStreamClient;
  ledger: AccountLedger;
  idempotency: IdempotencyKeys;
  submitter: TaskSubmitter;
  views: TaskViewReader;
}

export interface CreatedTask extends SubmittedTask {
  status: "pending" | "running" | "success" | "failed";
}

/** The next task id: the sequence of a publish to TASK_IDS (unique and increasing across every edge). */
async function allocateTaskId(js: JetStreamClient): Promise<number> {
  return (await js.publish(STREAMS.taskIds.subjects[0])).seq;
}

async function existingTask(views: TaskViewReader, taskId: number): Promise<CreatedTask> {
  const view = await views.get(taskId);
  return { taskId, status: view?.status ?? "pending", ...(view?.providerTaskId ? { providerTaskId: view.providerTaskId } : {}) };
}

/**
 * Create, in the order that keeps money and tasks consistent: id → (idempotency claim) → reserve the
 * estimated cost (403 if short; nothing created) → queue the job (if that fails, release the
 * reservation) → wait for the upstream's task id.
 */
export async function createVideoTask(
  deps: CreateDeps,
  account: string,
  request: NormalizedVideoRequest,
  idempotencyKey: string | undefined,
): Promise<CreatedTask> {
  if (idempotencyKey !== undefined) {
    const earlier = await deps.idempotency.find(account, idempotencyKey);
    if (earlier !== undefined) return existingTask(deps.views, earlier);
  }
  const taskId = await allocateTaskId(deps.js);
  if (idempotencyKey !== undefined) {
    const owner = await deps.idempotency.claim(account, idempotencyKey, taskId);
    if (owner !== taskId) return existingTask(deps.views, owner);
  }
  const { job } = request;
  try {
    const amountMicros = costMicros([{ tokens: job.estimatedTokens, pricePerMillionTokens: job.pricePerMillionTokens }]);
    await deps.ledger.execute(account, { type: "reserve", taskId, amountMicros });
  } catch (error) {
    if (idempotencyKey !== undefined) await deps.idempotency.release(account, idempotencyKey);
    throw error;
  }
  try {
    return { ...(await deps.submitter.submit(account, taskId, request)), status: "pending" };
  } catch (error) {
    if (error instanceof JobNotQueuedError) {
      await deps.ledger.execute(account, { type: "release", taskId, reason: "the job could not be queued" });
      if (idempotencyKey !== undefined) await deps.idempotency.release(account, idempotencyKey);
    }
    throw error;
  }
}
