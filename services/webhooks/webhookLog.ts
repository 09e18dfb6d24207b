import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { DeliverPolicy } from "@nats-io/jetstream";
import { z } from "zod";
import { STREAMS, webhookLogSubject } from "../../infra/jetstreamLayout.ts";

/** One delivery attempt, as `reelay webhooks log` shows it. */
export const WebhookAttempt = z.object({
  at: z.string(),
  taskId: z.number().int(),
  webhookId: z.string(),
  type: z.string(),
  /** The callback URL without its query (which may hold a receiver's token). */
  target: z.string(),
  attempt: z.number().int().positive(),
  outcome: z.enum(["delivered", "failed", "gave_up"]),
  status: z.number().int().optional(),
  error: z.string().optional(),
  durationMs: z.number().int().nonnegative(),
});
export type WebhookAttempt = z.infer<typeof WebhookAttempt>;

export const withoutQuery = (url: string): string => {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return "(not a URL)";
  }
};

/** Records an attempt on webhooklog.<account> (best effort: the log is for people, deliveries do not wait on it). */
export function recordAttempt(js: JetStreamClient, account: string, attempt: WebhookAttempt): void {
  js.publish(webhookLogSubject(account), JSON.stringify(attempt)).catch(() => undefined);
}

/** The account's recent attempts, oldest first (the stream keeps the last 200 per account, a week at most). */
export async function readAttempts(js: JetStreamClient, jsm: JetStreamManager, account: string): Promise<WebhookAttempt[]> {
  const subject = webhookLogSubject(account);
  const last = await jsm.direct.getMessage(STREAMS.webhookLog.name, { last_by_subj: subject }).catch(() => null);
  if (!last) return [];
  const consumer = await js.consumers.get(STREAMS.webhookLog.name, { filter_subjects: subject, deliver_policy: DeliverPolicy.All });
  const attempts: WebhookAttempt[] = [];
  for await (const msg of await consumer.consume()) {
    const parsed = WebhookAttempt.safeParse(msg.json());
    if (parsed.success) attempts.push(parsed.data);
    if (msg.seq >= last.seq) break;
  }
  return attempts;
}
