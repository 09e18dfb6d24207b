import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ledgerSubject } from "../contracts/ledger.ts";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { openTask } from "./helpers/openTask.ts";
import { startTestNats } from "./helpers/testNats.ts";

/**
 * The projector's ledger lingers before writing an idle account's closes, so settlements that come close
 * together are one money message: each money message fences the account's next create (services/projector/main.ts).
 */
describe("settlement linger", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "linger-test", { replicas: 1, leaseMs: 5_000 });
  });
  afterAll(async () => {
    await nats?.nc.close();
    await server?.stop();
  });

  // The account opens five tasks: its money stays in its first epoch.
  const ledgerMessages = async (account: string) => (await nats.jsm.streams.info(STREAMS.events.name, { subjects_filter: ledgerSubject(account, 0) })).state.subjects?.[ledgerSubject(account, 0)] ?? 0;

  async function settleFive(account: string, ledger: AccountLedger): Promise<void> {
    const opener = new AccountLedger(nats);
    await opener.execute(account, { type: "credit", amountMicros: 100_000_000, creditId: `${account}-credit` });
    for (let taskId = 1; taskId <= 5; taskId++) await openTask(opener, account, taskId, { amountMicros: 1_000_000, msgID: `open-${account}-${taskId}` });
    await Promise.all(
      [1, 2, 3, 4, 5].map(async (taskId) => {
        // The settlements come a few milliseconds apart, as a reactor's batches do.
        await new Promise((resolve) => setTimeout(resolve, taskId * 5));
        await ledger.close(account, { type: "settle", taskId, costMicros: 500_000, totalTokens: 1, model: "m" }, 0);
      }),
    );
  }

  it("given a ledger that lingers 100 ms on closes, when five settlements of one account come within 25 ms, then they are one ledger message and each is charged", async () => {
    await settleFive("lingering", new AccountLedger(nats, { closeLingerMs: 100 }));
    expect(await ledgerMessages("lingering")).toBe(2); // the credit, then the five settlements together
    const account = await new AccountLedger(nats).current("lingering");
    expect([account.balanceMicros, account.reservedMicros]).toEqual([100_000_000 - 5 * 500_000, 0]);
  });

  it("given a ledger that does not linger, then the first settlement goes alone", async () => {
    await settleFive("eager", new AccountLedger(nats));
    const eager = await new AccountLedger(nats).current("eager");
    expect([eager.balanceMicros, eager.reservedMicros]).toEqual([100_000_000 - 5 * 500_000, 0]);
    expect(await ledgerMessages("eager")).toBeGreaterThan(2);
  });
});
