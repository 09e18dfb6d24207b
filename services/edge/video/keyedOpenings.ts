import type { JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import { TaskOpening } from "../../../contracts/taskOpening.ts";
import { accountOpenings } from "../../../contracts/videoTask.ts";
import { DUPLICATE_WINDOW_MS, STREAMS } from "../../../infra/jetstreamLayout.ts";
import { directMessages } from "../../shared/subjectLog.ts";
import type { KeyedTask } from "../../tasks/idempotencyIndex.ts";

const READ_BATCH = 256;

/** Where a read of an account's openings starts: a time, or the sequence after what an earlier read saw. */
export type OpeningsFrom = { start_time: Date } | { seq: number };

/** An account's openings read up to the end of the log: the keyed ones, and where to go on from next time. */
export interface KeyedOpeningsRead {
  keyed: Array<{ keyHash: string; task: KeyedTask }>;
  /** How many openings were read. */
  read: number;
  next: OpeningsFrom;
}

/**
 * Reads an account's openings from `from` to the end of the log (only this account's), keeping the keyed ones;
 * past `max` openings (to the end of a batch) it stops, and `next` says where the rest begins.
 */
export async function readKeyedOpenings(jsm: JetStreamManager, account: string, from: OpeningsFrom, max = Infinity): Promise<KeyedOpeningsRead> {
  const subject = accountOpenings(account);
  const keyed: KeyedOpeningsRead["keyed"] = [];
  let next = from;
  let readInAll = 0;
  for (let read = READ_BATCH; read === READ_BATCH && readInAll < max; readInAll += read) {
    read = 0;
    const start = next;
    for await (const msg of directMessages((): Promise<AsyncIterable<StoredMsg>> => jsm.direct.getBatch(STREAMS.events.name, { ...start, next_by_subj: subject, batch: READ_BATCH }))) {
      read++;
      next = { seq: msg.seq + 1 };
      const opening = TaskOpening.safeParse(msg.json());
      const idempotency = opening.success ? opening.data.task.data.idempotency : undefined;
      if (opening.success && idempotency) keyed.push({ keyHash: idempotency.keyHash, task: { taskId: opening.data.task.meta.taskId, fingerprint: idempotency.fingerprint } });
    }
  }
  return { keyed, read: readInAll, next };
}

/**
 * The task an Idempotency-Key opened in the last duplicate window. For a keyed create the balance refused: the
 * money may be gone because a create with the same key (a retry racing it, on this edge or another) just spent
 * it, and then that create's task is the answer, not a 403. Only read on that refusal.
 */
export async function recentKeyedOpening(jsm: JetStreamManager, account: string, keyHash: string): Promise<KeyedTask | undefined> {
  const { keyed } = await readKeyedOpenings(jsm, account, { start_time: new Date(Date.now() - DUPLICATE_WINDOW_MS) });
  return keyed.find((opening) => opening.keyHash === keyHash)?.task;
}
