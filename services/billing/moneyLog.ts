import { JetStreamApiError, JetStreamError, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { ledgerEventsOf, moneySubjects, type LedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { ConcurrencyError } from "../shared/errors.ts";

/** Messages per direct batch get while catching an account up. */
const READ_BATCH = 256;
const WRONG_LAST_SEQUENCE = 10071;

/** The stream already held a message with this msgID (within its duplicate window): it is at `sequence`. */
export class DuplicateMoneyWrite extends ConcurrencyError {
  constructor(readonly sequence: number, msgID: string) {
    super(`${msgID} was already written (sequence ${sequence})`);
  }
}

/**
 * One account's money in stream EVENTS: every message under `acct.<account>.money.` (its ledger messages and its
 * task openings), read in stream order and appended with the guard over all of them, so an account's money
 * is always decided on everything that moved it and two writers can never both spend the same balance.
 */
export class MoneyLog {
  constructor(private readonly js: JetStreamClient, private readonly jsm: JetStreamManager) {}

  /**
   * The account's money events after `afterSequence` (a sequence of one of its messages, or 0) and the sequence
   * of its last money message: the guard for the next write.
   */
  async read(account: string, afterSequence: number): Promise<{ events: Array<{ event: LedgerEvent; sequence: number }>; lastSequence: number }> {
    const events: Array<{ event: LedgerEvent; sequence: number }> = [];
    let lastSequence = afterSequence;
    for (let read = READ_BATCH; read === READ_BATCH; ) {
      read = 0;
      try {
        const batch = await this.jsm.direct.getBatch(STREAMS.events.name, { seq: lastSequence + 1, next_by_subj: moneySubjects(account), batch: READ_BATCH });
        for await (const msg of batch) {
          for (const event of ledgerEventsOf(msg.json())) events.push({ event, sequence: msg.seq });
          lastSequence = msg.seq;
          read++;
        }
      } catch (error) {
        // A batch get with nothing to send ends in a 404 status (JetStreamStatusError, not exported by name).
        if (!(error instanceof JetStreamError && "code" in error && error.code === 404)) throw error;
      }
    }
    return { events, lastSequence };
  }

  /**
   * Writes `body` on `subject` (one of the account's money subjects) only if the account's last money
   * message is still `expectedLastSequence`. `msgID` makes a retried publish (lost answer) land once: the
   * server checks it before the guard, and a duplicate names where the first one is.
   */
  async append(account: string, subject: string, body: string, msgID: string, expectedLastSequence: number, headers?: MsgHdrs): Promise<number> {
    try {
      const ack = await this.js.publish(subject, body, {
        msgID,
        expect: { lastSubjectSequence: expectedLastSequence, lastSubjectSequenceSubject: moneySubjects(account) },
        ...(headers ? { headers } : {}),
      });
      if (ack.duplicate) throw new DuplicateMoneyWrite(ack.seq, msgID);
      return ack.seq;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) {
        throw new ConcurrencyError(`account ${account}'s money changed under us (expected last sequence ${expectedLastSequence})`);
      }
      throw error;
    }
  }
}
