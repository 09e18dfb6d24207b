import { MessageChannel } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { ledgerSubject } from "../contracts/ledger.ts";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { BridgedCloser, serveCloses } from "../services/billing/reservationCloser.ts";
import { openTask } from "./helpers/openTask.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

/**
 * Settlement's ledger lingers before writing an idle account's closes, so settlements that come close together
 * are one money message: each money message fences the account's next create in every other process
 * (SETTLEMENT_LINGER_MS in services/billing/settlement.ts). In `reelay serve` that ledger is the edge's own,
 * reached from the projector's thread through a port (services/billing/reservationCloser.ts), and its creates
 * must never wait for the closes it holds.
 */
describe("settlement linger", () => {
  const suite = natsPerSuite("linger-test", 5_000);

  // The account opens five tasks: its money stays in its first epoch.
  const ledgerMessages = async (account: string) => (await suite.nats.jsm.streams.info(STREAMS.events.name, { subjects_filter: ledgerSubject(account, 0) })).state.subjects?.[ledgerSubject(account, 0)] ?? 0;

  async function settleFive(account: string, ledger: AccountLedger): Promise<void> {
    const opener = new AccountLedger(suite.nats);
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
    await settleFive("lingering", new AccountLedger(suite.nats, { closeLingerMs: 100 }));
    expect(await ledgerMessages("lingering")).toBe(2); // the credit, then the five settlements together
    const account = await new AccountLedger(suite.nats).current("lingering");
    expect([account.balanceMicros, account.reservedMicros]).toEqual([100_000_000 - 5 * 500_000, 0]);
  });

  it("given a ledger that does not linger, then the first settlement goes alone", async () => {
    await settleFive("eager", new AccountLedger(suite.nats));
    const eager = await new AccountLedger(suite.nats).current("eager");
    expect([eager.balanceMicros, eager.reservedMicros]).toEqual([100_000_000 - 5 * 500_000, 0]);
    expect(await ledgerMessages("eager")).toBeGreaterThan(2);
  });

  it("given closes lingering in the ledger that also opens the account's tasks, when a task opens meanwhile, then it is written at once and the closes still go together after the linger", async () => {
    const account = "shared-writer";
    const ledger = new AccountLedger(suite.nats, { closeLingerMs: 400 });
    await ledger.execute(account, { type: "credit", amountMicros: 100_000_000, creditId: `${account}-credit` });
    // Task ids are the store's, never reused (a settlement's msgID names its task): the specs above used 1–5.
    for (let taskId = 21; taskId <= 23; taskId++) await openTask(ledger, account, taskId, { amountMicros: 1_000_000, msgID: `open-${account}-${taskId}` });
    let closed = 0;
    const closes = [21, 22, 23].map((taskId) =>
      ledger.close(account, { type: "settle", taskId, costMicros: 500_000, totalTokens: 1, model: "m" }, 0).finally(() => closed++),
    );
    await openTask(ledger, account, 24, { amountMicros: 1_000_000, msgID: `open-${account}-24` });
    // An order, not a time: however slow the machine, a create queued behind the closes would be answered after them.
    expect(closed, "the create waited for the closes' linger").toBe(0);
    expect(await Promise.all(closes)).toEqual(["closed", "closed", "closed"]);
    expect(await ledgerMessages(account)).toBe(2); // the credit, then the three settlements together
    const after = await new AccountLedger(suite.nats).current(account);
    expect([after.balanceMicros, after.reservedMicros]).toEqual([100_000_000 - 3 * 500_000, 1_000_000]);
  });

  it("closes sent through a port are made by the ledger on its other end, which also says what it found; a failure there fails the close here", async () => {
    const account = "bridged";
    const ledger = new AccountLedger(suite.nats);
    await ledger.execute(account, { type: "credit", amountMicros: 10_000_000, creditId: `${account}-credit` });
    const opening = await openTask(ledger, account, 11, { amountMicros: 1_000_000, msgID: `open-${account}-11` });
    const { port1, port2 } = new MessageChannel();
    serveCloses(port1, ledger);
    const bridged = new BridgedCloser(port2);
    const settle = { type: "settle" as const, taskId: opening.meta.taskId, costMicros: 400_000, totalTokens: 1, model: "m" };
    expect(await bridged.close(account, settle, 0)).toBe("closed");
    expect(await bridged.close(account, settle, 0)).toBe("closedBefore");
    expect(await bridged.close(account, { type: "release", taskId: 12, reason: "never opened" }, 0)).toBe("notReserved");
    expect((await ledger.current(account)).balanceMicros).toBe(10_000_000 - 400_000);

    const broken = new MessageChannel();
    serveCloses(broken.port1, { close: () => Promise.reject(new Error("NATS went away")) });
    await expect(new BridgedCloser(broken.port2).close(account, settle, 0)).rejects.toThrow(/NATS went away/);
    for (const port of [port1, port2, broken.port1, broken.port2]) port.close();
  });
});
