/**
 * Where chat billing plugs in. The relay asks before spending (so an exhausted account gets a 403
 * before any upstream cost) and reports usage once a response is complete. The ledger implementation is
 * services/billing/chatUsageMeter.ts.
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
