import { setTimeout as sleep } from "node:timers/promises";
import { SURELY_DEDUPLICATED_MS } from "../../infra/jetstreamLayout.ts";
import type { Logger } from "../shared/log.ts";
import { chatChargesUnwritten } from "../shared/metrics/metrics.ts";
import { availableMicros, InsufficientBalanceError } from "./account.ts";
import type { AccountLedger } from "./accountLedger.ts";
import type { BalanceMirror } from "./balanceMirror.ts";
import { costMicros, formatYuan } from "./pricing.ts";

/** What a chat request is billed at: the model's prices per million tokens. */
export interface ChatBill {
  account: string;
  /** The public model name the client asked for. */
  model: string;
  /** Unique per chat request (the `x-request-id` we answered with): the idempotency key of its hold and charge. */
  requestId: string;
  inputPricePerMillionTokens: number;
  outputPricePerMillionTokens: number;
}

/** The most a request may cost: its prompt and its longest answer. */
export interface ChatHoldRequest extends ChatBill {
  promptTokens: number;
  maxCompletionTokens: number;
}

export interface ChatUsageCharge extends ChatBill {
  promptTokens: number;
  completionTokens: number;
  /** The tokens were counted by reelay from what it relayed (the upstream reported no usage). */
  counted: boolean;
}

/**
 * Where chat billing plugs in: the relay holds the request's most before any upstream cost (refused: OpenAI's
 * 429 insufficient_quota, nothing relayed), and charges once the answer is over, however it ended.
 */
export interface ChatUsageMeter {
  /** Throws an InsufficientBalanceError when the account cannot cover the request's most. */
  reserve(hold: ChatHoldRequest): Promise<void>;
  /**
   * Called once per reserved request, after the answer ended (completed, failed, or the client left), with
   * the upstream's usage or the tokens counted from what was relayed (0 when nothing was). Closes the hold.
   */
  charge(charge: ChatUsageCharge): Promise<void>;
  /** The edge is stopping: charges still being written get one more try, and this resolves once they ended. */
  stop?(): Promise<void>;
}

const FIRST_CHARGE_RETRY_PAUSE_MS = 250;
const MAX_CHARGE_RETRY_PAUSE_MS = 5_000;

const isFree = (bill: ChatBill): boolean => bill.inputPricePerMillionTokens === 0 && bill.outputPricePerMillionTokens === 0;

/**
 * Chat billing on the ledger: a ChatReserved hold, guarded by the account's money like a task's reservation
 * (so concurrent requests cannot together spend past the credit limit), closed by a ChatUsageCharged keyed
 * by the request id. A hold its edge never closes (the edge crashed) stops counting after `holdTtlMs`.
 * A free model (both prices 0) writes nothing, but still serves only accounts with money available.
 */
export class LedgerChatUsageMeter implements ChatUsageMeter {
  /** Charges being written (and written again after a failure): `stop` waits for them. */
  private readonly charging = new Set<Promise<void>>();
  private readonly stopping = new AbortController();

  constructor(
    private readonly ledger: Pick<AccountLedger, "execute" | "current">,
    private readonly balances: Pick<BalanceMirror, "get">,
    private readonly holdTtlMs: number,
    private readonly log?: Logger,
  ) {}

  async reserve(hold: ChatHoldRequest): Promise<void> {
    if (isFree(hold)) return this.assertAvailable(hold.account);
    try {
      await this.ledger.execute(hold.account, {
        type: "reserveChat",
        requestId: hold.requestId,
        model: hold.model,
        amountMicros: priceOf(hold, hold.promptTokens, hold.maxCompletionTokens),
        expiresAt: new Date(Date.now() + this.holdTtlMs).toISOString(),
      });
    } catch (error) {
      // Refused for money: nothing was written. Anything else (no answer in time) may still land once the server
      // answers, a hold nobody closes that keeps the account's money for holdTtlMs: the request, refused, is closed
      // as one that relayed nothing (an empty charge, written until it lands like any other).
      if (!(error instanceof InsufficientBalanceError)) {
        this.tracked(this.chargeUntilWritten({ ...hold, promptTokens: 0, completionTokens: 0, counted: true })).catch(() => undefined);
      }
      throw error;
    }
  }

  /** Available money, read from the mirrored `balances` view on the hot path, confirmed with the ledger before a refusal. */
  private async assertAvailable(account: string): Promise<void> {
    const mirrored = this.balances.get(account);
    if (mirrored && availableMicros(mirrored) > 0) return;
    // The mirror lags the ledger (a credit a moment ago): before refusing, ask the ledger itself.
    const available = availableMicros(await this.ledger.current(account));
    if (available <= 0) throw new InsufficientBalanceError(`insufficient balance: available ${formatYuan(available)} yuan`);
  }

  charge(charge: ChatUsageCharge): Promise<void> {
    if (isFree(charge)) return Promise.resolve();
    return this.tracked(
      this.chargeUntilWritten(charge).catch((error: unknown) => {
        // A relayed answer that stays unpaid (its hold lapses).
        chatChargesUnwritten.inc();
        throw error;
      }),
    );
  }

  /** A charge being written, kept for `stop` to wait for. */
  private tracked(written: Promise<void>): Promise<void> {
    this.charging.add(written);
    written.then(
      () => this.charging.delete(written),
      () => this.charging.delete(written),
    );
    return written;
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.charging]);
  }

  /**
   * A charge must land (an answer was relayed, or a hold may have been written): a failed write (no answer in
   * time, nats-server gone with it unread, a failover) is tried again, with the same msgID, for as long as a try
   * that did land while only its answer was lost is surely recognised by it (`chat-<requestId>`), so the account
   * is never charged twice; or once more when the edge stops. Rejects when it gave up: the hold then lapses as a
   * crashed edge's does, and the request goes unpaid.
   */
  private async chargeUntilWritten(charge: ChatUsageCharge): Promise<void> {
    const command = {
      type: "chargeChat" as const,
      requestId: charge.requestId,
      model: charge.model,
      promptTokens: charge.promptTokens,
      completionTokens: charge.completionTokens,
      costMicros: priceOf(charge, charge.promptTokens, charge.completionTokens),
      ...(charge.counted ? { counted: true } : {}),
    };
    const giveUpAt = performance.now() + SURELY_DEDUPLICATED_MS;
    for (let pause = FIRST_CHARGE_RETRY_PAUSE_MS; ; pause = Math.min(pause * 2, MAX_CHARGE_RETRY_PAUSE_MS)) {
      try {
        await this.ledger.execute(charge.account, command);
        return;
      } catch (error) {
        if (this.stopping.signal.aborted || performance.now() + pause > giveUpAt) throw error;
        // Once per charge: in an outage every answer that ends has one, and each is tried every few seconds.
        if (pause === FIRST_CHARGE_RETRY_PAUSE_MS) {
          this.log?.warn({ err: error, account: charge.account, requestId: charge.requestId }, "a chat usage charge was not written; writing it again until it lands");
        }
        await sleep(pause, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    }
  }
}

const priceOf = (bill: ChatBill, promptTokens: number, completionTokens: number): number =>
  costMicros([
    { tokens: promptTokens, pricePerMillionTokens: bill.inputPricePerMillionTokens },
    { tokens: completionTokens, pricePerMillionTokens: bill.outputPricePerMillionTokens },
  ]);
