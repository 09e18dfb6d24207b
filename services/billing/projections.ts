import { AccountBalance, ledgerEventsOf, MONEY_EVENTS, type LedgerEvent } from "../../contracts/ledger.ts";
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
