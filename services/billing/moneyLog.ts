import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { epochMoneySubjects, ledgerEventsOf, moneySubjects, type LedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { directMessages, guardedPublish } from "../shared/subjectLog.ts";

/** Messages per direct batch get while catching an account up: a page with fewer is the end of what there is. */
export const MONEY_PAGE = 256;

/** One money message: its events (a group commit holds several) and its stream sequence. */
export interface MoneyMessage {
  events: LedgerEvent[];
  sequence: number;
}

/**
 * One account's money in stream EVENTS: its messages under `acct.<account>.money.<epoch>.` (its ledger
 * messages and its task openings), read in stream order, and appended with the guard over the writer's epoch
 * (contracts/ledger.ts), so an account's money is always decided on everything that moved it and two writers
 * can never both spend the same balance.
 */
export class MoneyLog {
  constructor(private readonly js: JetStreamClient, private readonly jsm: JetStreamManager) {}

  /** The messages of one epoch of the account after `afterSequence`, up to `MONEY_PAGE` of them (fewer: the end). */
  epochPage(account: string, epoch: number, afterSequence: number): Promise<MoneyMessage[]> {
    return this.page(epochMoneySubjects(account, epoch), afterSequence);
  }

  /**
   * Every money event of the account after `afterSequence`, whatever its epoch. The filter spans every
   * opening the account ever wrote: for the rare reads that look for one movement, never on a write's path.
   */
  async read(account: string, afterSequence: number): Promise<Array<{ event: LedgerEvent; sequence: number }>> {
    const events: Array<{ event: LedgerEvent; sequence: number }> = [];
    for (let after = afterSequence; ; ) {
      const page = await this.page(moneySubjects(account), after);
      for (const message of page) for (const event of message.events) events.push({ event, sequence: message.sequence });
      const last = page.at(-1);
      if (page.length < MONEY_PAGE || !last) return events;
      after = last.sequence;
    }
  }

  /**
   * Writes `body` on `subject` (one of the account's money subjects in `epoch`) only if the epoch's last message
   * is still `expectedLastSequence` (0: the epoch has none yet).
   */
  append(account: string, epoch: number, subject: string, body: string, msgID: string, expectedLastSequence: number, headers?: MsgHdrs): Promise<number> {
    return guardedPublish(this.js, subject, body, { msgID, expectedLastSequence, guard: epochMoneySubjects(account, epoch), headers });
  }

  private async page(filter: string, afterSequence: number): Promise<MoneyMessage[]> {
    const messages: MoneyMessage[] = [];
    for await (const msg of directMessages(() => this.jsm.direct.getBatch(STREAMS.events.name, { seq: afterSequence + 1, next_by_subj: filter, batch: MONEY_PAGE }))) {
      messages.push({ events: ledgerEventsOf(msg.json()), sequence: msg.seq });
    }
    return messages;
  }
}
