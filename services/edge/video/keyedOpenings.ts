import type { JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import { TaskOpening } from "../../../contracts/taskOpening.ts";
import { accountOpenings } from "../../../contracts/videoTask.ts";
import { DUPLICATE_WINDOW_MS, STREAMS } from "../../../infra/jetstreamLayout.ts";
import { ServiceUnavailableError } from "../../shared/errors.ts";
import { directMessages } from "../../shared/subjectLog.ts";
import type { KeyedTask } from "../../tasks/idempotencyIndex.ts";

const READ_BATCH = 256;

/**
 * The task an Idempotency-Key opened since `since`, read from the account's own openings (only this account's,
 * only from then on). Past `maxRead` openings without it, the answer is 503: not knowing is not "none".
 */
export async function keyedOpeningSince(jsm: JetStreamManager, account: string, keyHash: string, since: Date, maxRead = Infinity): Promise<KeyedTask | undefined> {
  const subject = accountOpenings(account);
  type From = { start_time: Date } | { seq: number };
  let from: From = { start_time: since };
  let readInAll = 0;
  for (let read = READ_BATCH; read === READ_BATCH; ) {
    if (readInAll >= maxRead) {
      throw new ServiceUnavailableError(
        "the Idempotency-Key index is behind (the task-log reactors are not keeping up): a create with this key may already exist; retry shortly",
        5,
      );
    }
    read = 0;
    const start: From = from;
    for await (const msg of directMessages((): Promise<AsyncIterable<StoredMsg>> => jsm.direct.getBatch(STREAMS.events.name, { ...start, next_by_subj: subject, batch: READ_BATCH }))) {
      read++;
      from = { seq: msg.seq + 1 };
      const opening = TaskOpening.safeParse(msg.json());
      const idempotency = opening.success ? opening.data.task.data.idempotency : undefined;
      if (opening.success && idempotency?.keyHash === keyHash) return { taskId: opening.data.task.meta.taskId, fingerprint: idempotency.fingerprint };
    }
    readInAll += read;
  }
  return undefined;
}

/**
 * The task an Idempotency-Key opened in the last duplicate window. For a keyed create the balance refused: the
 * money may be gone because a create with the same key (a retry racing it, on this edge or another) just spent
 * it, and then that create's task is the answer, not a 403. Only read on that refusal.
 */
export const recentKeyedOpening = (jsm: JetStreamManager, account: string, keyHash: string): Promise<KeyedTask | undefined> =>
  keyedOpeningSince(jsm, account, keyHash, new Date(Date.now() - DUPLICATE_WINDOW_MS));
