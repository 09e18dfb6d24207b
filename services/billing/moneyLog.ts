import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { ledgerEventsOf, moneySubjects, type LedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { directMessages, guardedPublish } from "../shared/subjectLog.ts";

/** Messages per direct batch get while catching an account up. */
const READ_BATCH = 256;

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
      const from = lastSequence + 1;
      for await (const msg of directMessages(() => this.jsm.direct.getBatch(STREAMS.events.name, { seq: from, next_by_subj: moneySubjects(account), batch: READ_BATCH }))) {
        for (const event of ledgerEventsOf(msg.json())) events.push({ event, sequence: msg.seq });
        lastSequence = msg.seq;
        read++;
      }
    }
    return { events, lastSequence };
  }

  /**
   * Writes `body` on `subject` (one of the account's money subjects) only if the account's last money
   * message is still `expectedLastSequence` (guardedPublish over `acct.<account>.money.>`).
   */
  append(account: string, subject: string, body: string, msgID: string, expectedLastSequence: number, headers?: MsgHdrs): Promise<number> {
    return guardedPublish(this.js, subject, body, { msgID, expectedLastSequence, guard: moneySubjects(account), headers });
  }
}
