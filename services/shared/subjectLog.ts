import { DeliverPolicy, JetStreamApiError, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { ConcurrencyError } from "./errors.ts";

const WRONG_LAST_SEQUENCE = 10071;

/** The stream already holds a message with this msgID (within its duplicate window). */
export class DuplicateAppendError extends ConcurrencyError {}

export interface SubjectHistory<Event> {
  events: Array<{ event: Event; sequence: number }>;
  /** Stream sequence of the subject's last message (0 when it has none): the fence for the next append. */
  lastSequence: number;
}

/**
 * Reads and appends the events of one subject in a stream (one aggregate: a task, an account) with
 * optimistic concurrency. Shared by the task log and the account ledger.
 */
export class SubjectLog<Event> {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly decode: (raw: unknown) => Event,
  ) {}

  /** The subject's events after `afterSequence` (all of them by default). */
  async read(subject: string, afterSequence = 0): Promise<SubjectHistory<Event>> {
    const last = await this.jsm.direct.getMessage(this.stream, { last_by_subj: subject });
    if (!last) return { events: [], lastSequence: 0 };
    if (last.seq <= afterSequence) return { events: [], lastSequence: last.seq };
    const consumer = await this.js.consumers.get(this.stream, {
      filter_subjects: subject,
      ...(afterSequence > 0 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: afterSequence + 1 } : {}),
    });
    const events: SubjectHistory<Event>["events"] = [];
    try {
      for await (const msg of await consumer.consume({ max_messages: 256 })) {
        events.push({ event: this.decode(msg.json()), sequence: msg.seq });
        if (msg.seq >= last.seq) break;
      }
    } finally {
      await consumer.delete().catch(() => undefined);
    }
    return { events, lastSequence: last.seq };
  }

  /**
   * Appends only if the subject's last message is still `expectedLastSequence`: two writers that both
   * think they are current cannot both write. `msgID` makes a retried publish (lost ack) land once; the
   * server checks it before the fence, so a duplicate may hide another writer's event: callers re-read.
   */
  async append(subject: string, event: Event, msgID: string, expectedLastSequence: number): Promise<number> {
    try {
      const ack = await this.js.publish(subject, JSON.stringify(event), { msgID, expect: { lastSubjectSequence: expectedLastSequence } });
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
