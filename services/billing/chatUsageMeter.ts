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
}

const isFree = (bill: ChatBill): boolean => bill.inputPricePerMillionTokens === 0 && bill.outputPricePerMillionTokens === 0;

/**
 * Chat billing on the ledger: a ChatReserved hold, guarded by the account's money like a task's reservation
 * (so concurrent requests cannot together spend past the credit limit), closed by a ChatUsageCharged keyed
 * by the request id. A hold its edge never closes (the edge crashed) stops counting after `holdTtlMs`.
 * A free model (both prices 0) writes nothing, but still serves only accounts with money available.
 */
export class LedgerChatUsageMeter implements ChatUsageMeter {
  constructor(private readonly ledger: AccountLedger, private readonly balances: BalanceMirror, private readonly holdTtlMs: number) {}

  async reserve(hold: ChatHoldRequest): Promise<void> {
    if (isFree(hold)) return this.assertAvailable(hold.account);
    await this.ledger.execute(hold.account, {
      type: "reserveChat",
      requestId: hold.requestId,
      model: hold.model,
      amountMicros: priceOf(hold, hold.promptTokens, hold.maxCompletionTokens),
      expiresAt: new Date(Date.now() + this.holdTtlMs).toISOString(),
    });
  }

  /** Available money, read from the mirrored `balances` view on the hot path, confirmed with the ledger before a refusal. */
  private async assertAvailable(account: string): Promise<void> {
    const mirrored = this.balances.get(account);
    if (mirrored && availableMicros(mirrored) > 0) return;
    // The mirror lags the ledger (a credit a moment ago): before refusing, ask the ledger itself.
    const available = availableMicros(await this.ledger.current(account));
    if (available <= 0) throw new InsufficientBalanceError(`insufficient balance: available ${formatYuan(available)} yuan`);
  }

  async charge(charge: ChatUsageCharge): Promise<void> {
    if (isFree(charge)) return;
    await this.ledger.execute(charge.account, {
      type: "chargeChat",
      requestId: charge.requestId,
      model: charge.model,
      promptTokens: charge.promptTokens,
      completionTokens: charge.completionTokens,
      costMicros: priceOf(charge, charge.promptTokens, charge.completionTokens),
      ...(charge.counted ? { counted: true } : {}),
    });
  }
}

const priceOf = (bill: ChatBill, promptTokens: number, completionTokens: number): number =>
  costMicros([
    { tokens: promptTokens, pricePerMillionTokens: bill.inputPricePerMillionTokens },
    { tokens: completionTokens, pricePerMillionTokens: bill.outputPricePerMillionTokens },
  ]);
