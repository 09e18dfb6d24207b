/**
 * An account's money as one aggregate, in three parts: the fold of its ledger events into totals and the
 * indexes decisions need (accountFold.ts), what one command adds to the ledger (accountDecision.ts), and
 * several commands of one account decided as one write (accountGroup.ts). Other modules import it from here.
 */
export {
  applyLedgerEvent,
  applyMoneyMessage,
  applyToTotals,
  availableMicros,
  emptyAccount,
  emptyBalance,
  type AccountState,
} from "./accountFold.ts";
export { causeOf, decideLedger, InsufficientBalanceError, isGroupable, type LedgerCommand } from "./accountDecision.ts";
export { decideGroup, type GroupOutcome } from "./accountGroup.ts";
