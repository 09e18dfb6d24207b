import type { ReelayConfig } from "../../contracts/config.ts";
import type { TaskOpening } from "../../contracts/taskOpening.ts";
import { AccountLedger } from "../../services/billing/accountLedger.ts";
import { ApiKeyStore } from "../../services/shared/apiKeys.ts";
import { connectNats } from "../../services/shared/nats.ts";
import { openingEvent } from "../../test/helpers/openTask.ts";

/** Yuan each bench account starts with: more than any run creates. */
const CREDIT_YUAN = 10_000_000;

/**
 * `count` accounts (`<prefix>-0` …), each opened, credited and given an API key, written directly as the
 * CLI would (forty CLI runs took longer than the phases they prepare). A gateway's creates come from many
 * tenants: each account's money is one chain of guarded writes, so one account alone measures one chain.
 */
export async function prepareAccounts(natsUrl: string, config: ReelayConfig, count: number, prefix: string): Promise<string[]> {
  const nats = await connectNats(natsUrl, "bench-accounts", { replicas: 1, leaseMs: config.runner.leaseMs });
  try {
    const ledger = new AccountLedger(nats);
    const store = new ApiKeyStore(nats.apiKeys);
    const keys: string[] = [];
    for (let index = 0; index < count; index++) {
      const account = `${prefix}-${index}`;
      await ledger.execute(account, { type: "open" });
      await ledger.execute(account, { type: "credit", amountMicros: CREDIT_YUAN * 1_000_000, creditId: `${account}-bench` });
      keys.push((await store.create(account)).key);
    }
    return keys;
  } finally {
    await nats.nc.close();
  }
}

/** The size of a create's one write (a mini task's opening with its reservation), for the raw baseline. */
export function openingBytes(): number {
  const task = openingEvent("bench-0", 1_000_000);
  const opening: TaskOpening = {
    task,
    money: { type: "CostReserved", data: { taskId: 1_000_000, amountMicros: 2_007_900 }, meta: { schema: 1, account: "bench-0", version: 3, at: task.meta.at, cause: "reserve-task-1000000" } },
  };
  return JSON.stringify(opening).length;
}
