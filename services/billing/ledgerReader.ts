import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { LedgerEvent } from "../../contracts/ledger.ts";
import { MoneyLog } from "./moneyLog.ts";
import { applyLedgerEvent, emptyAccount, type AccountState } from "./account.ts";

export interface LedgerEntry {
  event: LedgerEvent;
  sequence: number;
  /** The account right after this entry: a running balance. */
  after: AccountState;
}

/** An account's whole history with the running balance after each entry (for operators, not the hot path). */
export async function readAccountHistory(js: JetStreamClient, jsm: JetStreamManager, account: string): Promise<LedgerEntry[]> {
  const events = await new MoneyLog(js, jsm).read(account, 0);
  let state = emptyAccount(account);
  return events.map(({ event, sequence }) => {
    state = applyLedgerEvent(state, event);
    return { event, sequence, after: state };
  });
}

/** One line of what an entry did to the money, e.g. "reserved 5.009400 for task 12". */
export function describeLedgerEvent(event: LedgerEvent, yuan: (micros: number) => string): string {
  switch (event.type) {
    case "AccountOpened":
      return "account opened";
    case "AccountCredited":
      return `credited ${yuan(event.data.amountMicros)}${event.data.note ? ` (${event.data.note})` : ""}${event.data.actor ? ` by ${event.data.actor}` : ""}`;
    case "CostReserved":
      return `reserved ${yuan(event.data.amountMicros)} for task ${event.data.taskId}`;
    case "ReservationSettled":
      return `charged ${yuan(event.data.costMicros)} for task ${event.data.taskId} (${event.data.totalTokens} tokens of ${event.data.model}; reservation ${yuan(event.data.reservedMicros)} freed)`;
    case "ReservationReleased":
      return `released ${yuan(event.data.reservedMicros)} of task ${event.data.taskId}: ${event.data.reason}`;
    case "ChatUsageCharged": {
      const { costMicros, requestId, promptTokens, completionTokens, model, reservedMicros, counted, uncollectedMicros } = event.data;
      const tokens = `${promptTokens}+${completionTokens} tokens of ${model}${counted ? ", counted by reelay" : ""}`;
      const freed = reservedMicros === undefined ? "" : `; reservation ${yuan(reservedMicros)} freed`;
      const unpaid = uncollectedMicros === undefined ? "" : `; ${yuan(uncollectedMicros)} beyond the credit limit not collected`;
      return `charged ${yuan(costMicros)} for chat ${requestId} (${tokens}${freed}${unpaid})`;
    }
    case "ChatReserved":
      return `reserved ${yuan(event.data.amountMicros)} for chat ${event.data.requestId} (${event.data.model})`;
    case "ChatReservationLapsed":
      return `released ${yuan(event.data.reservedMicros)} of chat ${event.data.requestId}: its edge never closed it`;
    case "CreditLimitSet":
      return `credit limit set to ${yuan(event.data.limitMicros)}${event.data.actor ? ` by ${event.data.actor}` : ""}`;
  }
}
