import { createHash, randomUUID } from "node:crypto";
import { ValidationError } from "../shared/errors.ts";
import type { LedgerCommand } from "./account.ts";
import { parseYuan } from "./pricing.ts";

/**
 * An operator's credit as a ledger command. With an Idempotency-Key the credit's id is derived from the account
 * and the key: the account's fold remembers it (AccountCredited.creditId), so a retry of any age lands once,
 * and the same key on two accounts names two credits (msgIDs are stream-wide). Without one, every credit is new.
 */
export function creditCommand(
  account: string,
  amountMicros: number,
  options: { idempotencyKey?: string | undefined; note: string; actor?: string },
): Extract<LedgerCommand, { type: "credit" }> {
  const { idempotencyKey, note, actor } = options;
  const base = { type: "credit" as const, amountMicros, note, ...(actor ? { actor } : {}) };
  if (idempotencyKey === undefined) return { ...base, creditId: randomUUID() };
  if (idempotencyKey.length === 0 || idempotencyKey.length > 255) throw new ValidationError("Idempotency-Key must be 1 to 255 characters");
  const creditId = createHash("sha256").update(`${account}\n${idempotencyKey}`).digest("hex").slice(0, 32);
  return { ...base, creditId, keyed: true };
}

/** A credit limit in yuan: like an amount, but 0 (no debt allowed) is a limit too. */
export const parseCreditLimit = (text: string): number => (/^\s*0+(\.0{1,6})?\s*$/.test(text) ? 0 : parseYuan(text));
