import { NATS_DOWN, ServiceUnavailableError } from "../../shared/errors.ts";
import { createOnce } from "./createOnce.ts";
import { createTask, type CreateDeps, type CreatedTask } from "./createTask.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";

export type { CreateDeps, CreatedTask } from "./createTask.ts";

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
  // Every step needs NATS; waiting for its timeouts would only turn "try again" into a slow error.
  if (!deps.connection.connected()) throw new ServiceUnavailableError(NATS_DOWN);
  if (idempotencyKey !== undefined) return createOnce(deps, account, request, idempotencyKey);
  return createTask(deps, account, request, await deps.taskIds.take());
}

