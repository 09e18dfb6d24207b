import { z } from "zod";
import { TaskStatus } from "./videoTask.ts";

/**
 * One webhook to deliver: a status change of a task with a callback URL, as the task-log reactors found it
 * (stream WEBHOOK_JOBS). The dispatcher builds the body from the task's log at `version`.
 */
export const WebhookJob = z.object({
  taskId: z.number().int().positive(),
  /** The version of the event that changed the status: the `webhook-id` is `task-<id>-v<version>`. */
  version: z.number().int().positive(),
  status: TaskStatus,
  account: z.string(),
  callbackUrl: z.string(),
  /** When the status changed: the retry period runs from here. */
  at: z.string(),
});
export type WebhookJob = z.infer<typeof WebhookJob>;
