import type { LedgerEvent } from "../../contracts/ledger.ts";
import { MICROS_PER_YUAN } from "../../contracts/ledger.ts";
import { chatTokens, ledgerLostWrites, ledgerMovements } from "../shared/metrics/metrics.ts";

/** Counts a ledger event this process wrote: money by kind, and the chat tokens it bills. */
export function countLedgerEvent(event: LedgerEvent): void {
  const yuan = (micros: number) => micros / MICROS_PER_YUAN;
  switch (event.type) {
    case "AccountOpened":
      return;
    case "AccountCredited":
      ledgerMovements.inc({ kind: "credited" }, yuan(event.data.amountMicros));
      return;
    case "CostReserved":
      ledgerMovements.inc({ kind: "reserved" }, yuan(event.data.amountMicros));
      return;
    case "ReservationSettled":
      ledgerMovements.inc({ kind: "settled" }, yuan(event.data.costMicros));
      return;
    case "ReservationReleased":
      ledgerMovements.inc({ kind: "released" }, yuan(event.data.reservedMicros));
      return;
    case "ChatReserved":
      ledgerMovements.inc({ kind: "chat_reserved" }, yuan(event.data.amountMicros));
      return;
    case "ChatReservationLapsed":
      ledgerMovements.inc({ kind: "chat_lapsed" }, yuan(event.data.reservedMicros));
      return;
    case "CreditLimitSet":
      return;
    case "ChatUsageCharged":
      ledgerMovements.inc({ kind: "chat_charged" }, yuan(event.data.costMicros));
      chatTokens.inc({ model: event.data.model, kind: "prompt" }, event.data.promptTokens);
      chatTokens.inc({ model: event.data.model, kind: "completion" }, event.data.completionTokens);
      return;
  }
}

/** Counts a write that lost its account's guard to another writer's (a write of its own is never raced). */
export function countLostWrite(what: "open" | "close" | "other"): void {
  ledgerLostWrites.inc({ what });
}
