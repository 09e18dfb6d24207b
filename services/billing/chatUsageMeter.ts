import { availableMicros, InsufficientBalanceError } from "./account.ts";
import type { AccountLedger } from "./accountLedger.ts";
import type { BalanceMirror } from "./balanceMirror.ts";
import { costMicros, formatYuan } from "./pricing.ts";

/**
 * Where chat billing plugs in. The relay asks before spending (so an exhausted account gets a 403
 * before any upstream cost) and reports usage once a response is complete. LedgerChatUsageMeter below is the
 * ledger implementation.
 */
export interface ChatUsageCharge {
  account: string;
  /** The public model name the client asked for. */
  model: string;
  /** Unique per chat request (the `x-request-id` we answered with): the idempotency key for the charge. */
  requestId: string;
  promptTokens: number;
  completionTokens: number;
  inputPricePerMillionTokens: number;
  outputPricePerMillionTokens: number;
}

export interface ChatUsageMeter {
  /** Throws a ForbiddenError (403, OpenAI `insufficient_quota`) when the account may not spend. */
  assertCanSpend(account: string): Promise<void>;
  /**
   * Called at most once per request, after the response completed and only when usage is known
   * (non-streaming: the body's `usage`; streaming: the final usage chunk). Errors are logged, not sent:
   * the client already has its answer.
   */
  charge(input: ChatUsageCharge): Promise<void>;
}

/**
 * Chat billing on the ledger. Chat cost is known only after the answer, so nothing is reserved: an
 * account may start a request while its available balance is above zero (read from the mirrored
 * `balances` view on the hot path, confirmed with the ledger before a refusal), and the usage is charged
 * afterwards as a ChatUsageCharged event keyed by the request id (a retried charge lands once).
 * A free model (price 0) charges nothing.
 */
export class LedgerChatUsageMeter implements ChatUsageMeter {
  constructor(private readonly ledger: AccountLedger, private readonly balances: BalanceMirror) {}

  async assertCanSpend(account: string): Promise<void> {
    const mirrored = this.balances.get(account);
    if (mirrored && availableMicros(mirrored) > 0) return;
    // The mirror lags the ledger (a credit a moment ago): before refusing, ask the ledger itself.
    const available = availableMicros(await this.ledger.current(account));
    if (available <= 0) throw new InsufficientBalanceError(`insufficient balance: available ${formatYuan(available)} yuan`);
  }

  async charge(input: ChatUsageCharge): Promise<void> {
    const cost = costMicros([
      { tokens: input.promptTokens, pricePerMillionTokens: input.inputPricePerMillionTokens },
      { tokens: input.completionTokens, pricePerMillionTokens: input.outputPricePerMillionTokens },
    ]);
    if (cost === 0) return;
    await this.ledger.execute(input.account, {
      type: "chargeChat",
      requestId: input.requestId,
      model: input.model,
      promptTokens: input.promptTokens,
      completionTokens: input.completionTokens,
      costMicros: cost,
    });
  }
}
