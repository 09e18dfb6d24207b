import type { JetStreamClient, PubAck } from "@nats-io/jetstream";
import { moneyEpochAfter } from "../../contracts/ledger.ts";

/**
 * One account's chain of guarded openings, in the shape a create's opening takes (contracts/ledger.ts): a
 * subject of its own in the account's money epoch, guarded over that epoch only by the sequence the previous
 * opening got, and the epoch's last opening ends it (the next epoch starts empty). For the bench's baselines,
 * which write openings without reelay: `account` is the subject's prefix (e.g. `benchacct.3`). One publish at
 * a time: the next one's guard is this one's answer.
 */
export class OpeningChain {
  private last = 0;
  private openings = 0;

  constructor(
    private readonly js: JetStreamClient,
    private readonly account: string,
  ) {}

  async publish(taskId: number, body: string | Uint8Array, msgID?: string): Promise<PubAck> {
    const epoch = moneyEpochAfter(this.openings);
    const ack = await this.append(epoch, `task.${taskId}`, body, msgID);
    this.openings++;
    this.last = moneyEpochAfter(this.openings) === epoch ? ack.seq : 0;
    return ack;
  }

  /** A ledger message (settlements, credits) on `<account>.money.<epoch>.ledger`, on the same chain: it opens no task, so the epoch goes on. */
  async publishLedger(body: string | Uint8Array): Promise<PubAck> {
    const ack = await this.append(moneyEpochAfter(this.openings), "ledger", body);
    this.last = ack.seq;
    return ack;
  }

  /** `body` on `<account>.money.<epoch>.<rest>`, guarded over the epoch by the chain's last sequence. */
  private append(epoch: number, rest: string, body: string | Uint8Array, msgID?: string): Promise<PubAck> {
    return this.js.publish(`${this.account}.money.${epoch}.${rest}`, body, {
      ...(msgID === undefined ? {} : { msgID }),
      expect: { lastSubjectSequence: this.last, lastSubjectSequenceSubject: `${this.account}.money.${epoch}.>` },
    });
  }
}
