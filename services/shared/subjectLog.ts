import { JetStreamApiError, JetStreamError, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { ConcurrencyError } from "./errors.ts";

const WRONG_LAST_SEQUENCE = 10071;
/** Messages per direct batch get: one round trip for most histories (a task has about five events). */
const READ_BATCH = 256;

/** The stream already holds a message with this msgID (within its duplicate window). */
export class DuplicateAppendError extends ConcurrencyError {}

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

/** One event per message, as JSON. */
export const singleEventCodec = <Event>(parse: (raw: unknown) => Event): MessageCodec<Event> => ({
  decode: (raw) => [parse(raw)],
  encode: (events) => {
    if (events.length !== 1) throw new Error(`this log holds one event per message, not ${events.length}`);
    return JSON.stringify(events[0]);
  },
});

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
    const events: SubjectHistory<Event>["events"] = [];
    let next = afterSequence + 1;
    while (next <= last.seq) {
      let read = 0;
      for await (const msg of await this.jsm.direct.getBatch(this.stream, { seq: next, next_by_subj: subject, batch: READ_BATCH })) {
        if (msg.seq > last.seq) break;
        for (const event of this.codec.decode(msg.json())) events.push({ event, sequence: msg.seq });
        next = msg.seq + 1;
        read++;
      }
      if (read === 0) break;
    }
    return { events, lastSequence: last.seq };
  }

  /** The subject's first event, with one direct get (none: undefined). */
  async first(subject: string): Promise<{ event: Event; sequence: number } | undefined> {
    try {
      for await (const msg of await this.jsm.direct.getBatch(this.stream, { seq: 1, next_by_subj: subject, batch: 1 })) {
        const event = this.codec.decode(msg.json())[0];
        return event === undefined ? undefined : { event, sequence: msg.seq };
      }
    } catch (error) {
      // A batch get with nothing to send ends in a 404 status.
      // (JetStreamStatusError, which the package does not export by name.)
      if (!(error instanceof JetStreamError && "code" in error && error.code === 404)) throw error;
    }
    return undefined;
  }

  /**
   * Appends `events` as one message, only if the subject's last message is still `expectedLastSequence`: two writers that both
   * think they are current cannot both write. `msgID` makes a retried publish (lost ack) land once; the
   * server checks it before the fence, so a duplicate may hide another writer's event: callers re-read.
   */
  async append(subject: string, events: readonly Event[], msgID: string, expectedLastSequence: number, headers?: MsgHdrs): Promise<number> {
    try {
      const ack = await this.js.publish(subject, this.codec.encode(events), { msgID, expect: { lastSubjectSequence: expectedLastSequence }, ...(headers ? { headers } : {}) });
      if (ack.duplicate) throw new DuplicateAppendError(`${subject}: ${msgID} was already written`);
      return ack.seq;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) {
        throw new ConcurrencyError(`${subject} changed under us (expected last sequence ${expectedLastSequence})`);
      }
      throw error;
    }
  }
}
