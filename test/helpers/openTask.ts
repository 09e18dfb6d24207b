import type { TaskSubmittedEvent, VideoJobSpec } from "../../contracts/videoTask.ts";
import { openingTaskEvent } from "../../machines/videoTaskDecider.ts";
import type { AccountLedger } from "../../services/billing/accountLedger.ts";
import { sampleJob } from "./fixtures.ts";

/** Opens task `taskId` of `account` as the edge's create does: its first event and its reservation, one write. */
export async function openTask(
  ledger: Pick<AccountLedger, "open">,
  account: string,
  taskId: number,
  options: { amountMicros?: number; job?: VideoJobSpec; maxTaskMs?: number; callbackUrl?: string; msgID?: string } = {},
): Promise<TaskSubmittedEvent> {
  const opening = openingEvent(account, taskId, options);
  await ledger.open(opening, options.amountMicros ?? 0, options.msgID ?? `open-${taskId}`);
  return opening;
}

/** Task `taskId`'s opening event, not written. */
export function openingEvent(account: string, taskId: number, options: { job?: VideoJobSpec; maxTaskMs?: number; callbackUrl?: string } = {}): TaskSubmittedEvent {
  const deadlineAt = new Date(Date.now() + (options.maxTaskMs ?? 15 * 60_000)).toISOString();
  return openingTaskEvent({ taskId, account, job: options.job ?? sampleJob, ignoredFields: [], deadlineAt, ...(options.callbackUrl ? { callbackUrl: options.callbackUrl } : {}) }, new Date());
}
