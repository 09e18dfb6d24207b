import { expect } from "vitest";
import type { AccountLedger } from "../../services/billing/accountLedger.ts";

/**
 * An account's available money once it has no open reservation: a task's settlement is written behind its
 * end (grouped per account for 100 ms, services/projector/main.ts), so right after a task is final its
 * reservation may still be open.
 */
export async function availableOnceSettled(ledger: Pick<AccountLedger, "current">, account: string): Promise<number> {
  await expect.poll(async () => (await ledger.current(account)).reservedMicros, { timeout: 5_000 }).toBe(0);
  const state = await ledger.current(account);
  return state.balanceMicros - state.reservedMicros;
}
