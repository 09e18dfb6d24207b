import { AccountBalance, LEDGER_MESSAGES, ledgerEventsOf, MONEY_EVENTS, TaskCharge, type LedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { EventOutOfOrder, type Projection } from "../shared/projection.ts";
import { applyToTotals, emptyBalance } from "./account.ts";

/** Per-account balance, reservations and the stream sequence it reflects (bucket `balances`). */
export const balancesProjection: Projection<LedgerEvent, AccountBalance> = {
  name: "balances",
  stream: STREAMS.events.name,
  subjects: [MONEY_EVENTS],
  decode: ledgerEventsOf,
  keyOf: (event) => event.meta.account,
  evolve: (doc, event, sequence) => {
    const applied = doc?.version ?? 0;
    if (event.meta.version <= applied) return doc;
    if (event.meta.version !== applied + 1) {
      throw new EventOutOfOrder(`account ${event.meta.account}: got version ${event.meta.version} after ${applied}`);
    }
    return { ...applyToTotals(doc ?? emptyBalance(event.meta.account), event), sequence };
  },
  docSchema: AccountBalance,
};

/**
 * Per-task charge index (bucket `task_charges`): once a task's reservation is settled or released, what it
 * reserved and what it cost. A settlement or release carries the amount it closes, so the document needs
 * nothing of the opening, and the projection reads the ledger messages only (not the openings: a delivery per
 * create saved). An open reservation is in the account's fold (`balances`, the ledger writer) meanwhile.
 */
export const taskChargesProjection: Projection<LedgerEvent, TaskCharge> = {
  name: "task charges",
  stream: STREAMS.events.name,
  subjects: [LEDGER_MESSAGES],
  decode: ledgerEventsOf,
  keyOf: (event) => (event.type === "ReservationSettled" || event.type === "ReservationReleased" ? String(event.data.taskId) : undefined),
  // A task's closing makes its document: written with a create, no read first (a redelivery's create fails, then it reads).
  startsDocument: () => true,
  evolve: (doc, event) => {
    if (doc && event.meta.version <= doc.accountVersion) return doc;
    const accountVersion = event.meta.version;
    const { account } = event.meta;
    switch (event.type) {
      case "ReservationSettled": {
        const { taskId, reservedMicros, costMicros, totalTokens } = event.data;
        return { taskId, account, state: "settled", reservedMicros, costMicros, totalTokens, accountVersion };
      }
      case "ReservationReleased":
        return { taskId: event.data.taskId, account, state: "released", reservedMicros: event.data.reservedMicros, accountVersion };
      default:
        return doc;
    }
  },
  docSchema: TaskCharge,
};
