import { JetStreamApiCodes, JetStreamApiError, JetStreamError, type JetStreamClient, type JetStreamManager, type StoredMsg } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { ConcurrencyError } from "./errors.ts";

/**
 * "Wrong last sequence": 10071 from a stream of one replica (and a replicated one's stored check), 10164 from a
 * replicated stream whose guarded subject has a write in flight (seen on a 3-node cluster right after a leader
 * change, when it made creates answer 500). Both mean another writer may have got there first.
 */
const WRONG_LAST_SEQUENCE = new Set<number>([JetStreamApiCodes.StreamWrongLastSequence, JetStreamApiCodes.StreamWrongLastSequenceUnknown]);
/** Messages per direct batch get: one round trip for most histories (a task has about five events). */
const READ_BATCH = 256;

/** The stream already holds a message with this msgID (within its duplicate window), at `sequence`. */
export class DuplicateAppendError extends ConcurrencyError {
  constructor(readonly sequence: number, msgID: string) {
    super(`${msgID} was already written (sequence ${sequence})`);
  }
}

/**
 * Publishes `body` on `subject` only if the last message on `guard` (the subject itself, or a wildcard over
 * several: nats-server 2.12+) is still `expectedLastSequence`: two writers that both think they are current
 * cannot both write. `msgID` makes a retried publish (lost ack) land once: the server checks the guard first
 * (a retry whose first try landed fails it, as stale), so the caller reads again, decides again and, if it
 * still writes, writes with the same msgID under the current guard, which the server answers as a duplicate
 * of the first try (DuplicateAppendError; ids are kept for the duplicate window, across a crash too:
 * test/natsServerFeatures.int.spec.ts).
 */
export async function guardedPublish(
  js: JetStreamClient,
  subject: string,
  body: string,
  options: { msgID: string; expectedLastSequence: number; guard?: string; headers?: MsgHdrs | undefined },
): Promise<number> {
  const { msgID, expectedLastSequence, guard, headers } = options;
  try {
    const expect = { lastSubjectSequence: expectedLastSequence, ...(guard === undefined ? {} : { lastSubjectSequenceSubject: guard }) };
    const ack = await js.publish(subject, body, { msgID, expect, ...(headers ? { headers } : {}) });
    if (ack.duplicate) throw new DuplicateAppendError(ack.seq, msgID);
    return ack.seq;
  } catch (error) {
    if (error instanceof JetStreamApiError && WRONG_LAST_SEQUENCE.has(error.code)) {
      throw new ConcurrencyError(`${guard ?? subject} changed under us (expected last sequence ${expectedLastSequence})`);
    }
    throw error;
  }
}

/**
 * The messages a direct get answers (a batch, or the last of several subjects); none is no error: the server
 * ends such an answer with a 404 status (JetStreamStatusError, which the package does not export by name).
 */
export async function* directMessages(get: () => Promise<AsyncIterable<StoredMsg>>): AsyncGenerator<StoredMsg> {
  try {
    for await (const msg of await get()) yield msg;
  } catch (error) {
    if (!(error instanceof JetStreamError && "code" in error && error.code === 404)) throw error;
  }
}

export interface SubjectHistory<Event> {
  events: Array<{ event: Event; sequence: number }>;
  /** Stream sequence of the subject's last message (0 when it has none): the fence for the next append. */
  lastSequence: number;
}

/** How a log's messages hold its events: a message may hold several (the ledger's group commits). */
export interface MessageCodec<Event> {
  decode(raw: unknown): readonly Event[];
  encode(events: readonly Event[]): string;
}

/**
 * Reads and appends the events of one subject in a stream (one aggregate: a task, an account) with
 * optimistic concurrency. Shared by the task log and the account ledger. Events of one message share its
 * stream sequence.
 */
export class SubjectLog<Event> {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly codec: MessageCodec<Event>,
  ) {}

  /**
   * The subject's events after `afterSequence` (all of them by default), read with direct batch gets:
   * no consumer is created per read (that cost a JetStream API round trip and server state each time).
   */
  async read(subject: string, afterSequence = 0): Promise<SubjectHistory<Event>> {
    const last = await this.jsm.direct.getMessage(this.stream, { last_by_subj: subject });
    if (!last) return { events: [], lastSequence: 0 };
    if (last.seq <= afterSequence) return { events: [], lastSequence: last.seq };
    return { events: await this.readThrough(subject, last.seq, afterSequence), lastSequence: last.seq };
  }

  /** The subject's events after `afterSequence` up to `lastSequence` (its last message, known already). */
  async readThrough(subject: string, lastSequence: number, afterSequence = 0): Promise<SubjectHistory<Event>["events"]> {
    const events: SubjectHistory<Event>["events"] = [];
    let next = afterSequence + 1;
    while (next <= lastSequence) {
      let read = 0;
      for await (const msg of await this.jsm.direct.getBatch(this.stream, { seq: next, next_by_subj: subject, batch: READ_BATCH })) {
        if (msg.seq > lastSequence) break;
        for (const event of this.codec.decode(msg.json())) events.push({ event, sequence: msg.seq });
        next = msg.seq + 1;
        read++;
      }
      if (read === 0) break;
    }
    return events;
  }

  /** Appends `events` as one message, guarded by the subject's last sequence (guardedPublish). */
  append(subject: string, events: readonly Event[], msgID: string, expectedLastSequence: number, headers?: MsgHdrs): Promise<number> {
    return guardedPublish(this.js, subject, this.codec.encode(events), { msgID, expectedLastSequence, headers });
  }
}
