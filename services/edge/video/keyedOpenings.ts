import type { JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import { TaskOpening } from "../../../contracts/taskOpening.ts";
import { accountOpenings } from "../../../contracts/videoTask.ts";
import { DUPLICATE_WINDOW_MS, STREAMS } from "../../../infra/jetstreamLayout.ts";
import { directMessages } from "../../shared/subjectLog.ts";
import type { KeyedTask } from "../../tasks/idempotencyIndex.ts";

const READ_BATCH = 256;

/**
 * The task an Idempotency-Key opened in the last duplicate window, read from the account's own openings.
 * For a keyed create the balance refused: the money may be gone because a create with the same key (a retry
 * racing it, on this edge or another) just spent it, and then that create's task is the answer, not a 403.
 * Only this account's openings of the last window are read, and only on that refusal.
 */
export async function recentKeyedOpening(jsm: JetStreamManager, account: string, keyHash: string): Promise<KeyedTask | undefined> {
  const subject = accountOpenings(account);
  type From = { start_time: Date } | { seq: number };
  let from: From = { start_time: new Date(Date.now() - DUPLICATE_WINDOW_MS) };
  for (let read = READ_BATCH; read === READ_BATCH; ) {
    read = 0;
    const start: From = from;
    for await (const msg of directMessages((): Promise<AsyncIterable<StoredMsg>> => jsm.direct.getBatch(STREAMS.events.name, { ...start, next_by_subj: subject, batch: READ_BATCH }))) {
      read++;
      from = { seq: msg.seq + 1 };
      const opening = TaskOpening.safeParse(msg.json());
      const idempotency = opening.success ? opening.data.task.data.idempotency : undefined;
      if (opening.success && idempotency?.keyHash === keyHash) return { taskId: opening.data.task.meta.taskId, fingerprint: idempotency.fingerprint };
    }
  }
  return undefined;
}
