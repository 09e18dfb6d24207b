import { AccountBalance, ledgerEventsOf, TaskCharge, type LedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import type { Projection } from "../shared/projection.ts";
import { EventOutOfOrder } from "../shared/projection.ts";
import { applyToTotals, emptyBalance } from "./account.ts";

/** Per-account balance, reservations and the stream sequence it reflects (bucket `balances`). */
export const balancesProjection: Projection<LedgerEvent, AccountBalance> = {
  name: "balances",
  stream: STREAMS.ledger.name,
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

/** Per-task charge index (bucket `task_charges`): reserved, then settled with its cost, or released. */
export const taskChargesProjection: Projection<LedgerEvent, TaskCharge> = {
  name: "task charges",
  stream: STREAMS.ledger.name,
  decode: ledgerEventsOf,
  keyOf: (event) =>
    event.type === "CostReserved" || event.type === "ReservationSettled" || event.type === "ReservationReleased"
      ? String(event.data.taskId)
      : undefined,
  startsDocument: (event) => event.type === "CostReserved",
  evolve: (doc, event) => {
    if (doc && event.meta.version <= doc.accountVersion) return doc;
    const accountVersion = event.meta.version;
    switch (event.type) {
      case "CostReserved":
        return { taskId: event.data.taskId, account: event.meta.account, state: "reserved", reservedMicros: event.data.amountMicros, accountVersion };
      case "ReservationSettled":
        // Before its reservation (another projector instance holds that one, or it is being retried):
        // dropping it would leave the task "reserved" for good, so it waits its turn.
        if (!doc) throw new EventOutOfOrder(`task ${event.data.taskId}: settled before it was reserved`);
        return { ...doc, state: "settled", costMicros: event.data.costMicros, totalTokens: event.data.totalTokens, accountVersion };
      case "ReservationReleased":
        if (!doc) throw new EventOutOfOrder(`task ${event.data.taskId}: released before it was reserved`);
        return { ...doc, state: "released", accountVersion };
      default:
        return doc;
    }
  },
  docSchema: TaskCharge,
};
