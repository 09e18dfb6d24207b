import { describe, expect, it } from "vitest";
import { epochMoneySubjects, ledgerSubject, MONEY_EPOCH_OPENINGS, moneySubjects } from "../contracts/ledger.ts";
import { isTaskOpeningSubject } from "../contracts/videoTask.ts";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { availableMicros } from "../services/billing/account.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { readWholeStream } from "../services/shared/projectionReplay.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { accountTaskIds } from "../services/tasks/taskIndex.ts";
import { openTask } from "./helpers/openTask.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

/**
 * An account's money in epochs (contracts/ledger.ts): each write is guarded over its epoch only, so a create's
 * guard costs the server the same whatever the account's history; the message of an epoch's last opening ends it.
 */
describe("money epochs", () => {
  const suite = natsPerSuite("epochs-test", 5_000);

  /** Every money message of the account in log order: its subject's epoch, and whether it is an opening. */
  async function moneyMessages(account: string): Promise<Array<{ epoch: number; opening: boolean; subject: string; seq: number }>> {
    const messages: Array<{ epoch: number; opening: boolean; subject: string; seq: number }> = [];
    await readWholeStream(suite.nats.js, suite.nats.jsm, STREAMS.events.name, [moneySubjects(account)], (msg) => {
      messages.push({ epoch: Number(msg.subject.split(".")[3]), opening: isTaskOpeningSubject(msg.subject), subject: msg.subject, seq: msg.seq });
    });
    return messages;
  }

  it("given two writers racing across an epoch's end, then every message is in the epoch the openings before it fill, none lands in an ended epoch, and the money is exact", async () => {
    const account = "epochal";
    const first = new AccountLedger(suite.nats);
    await first.execute(account, { type: "credit", amountMicros: 100_000_000_000, creditId: "epochal-credit" });
    const beforeTheEnd = MONEY_EPOCH_OPENINGS - 4;
    for (let taskId = 1; taskId <= beforeTheEnd; taskId++) await openTask(first, account, taskId, { amountMicros: 1_000 });
    // A second process that last read the account long ago: its writes are decided on a stale fold and must fail their guard.
    const second = new AccountLedger(suite.nats);
    await second.current(account);
    await openTask(first, account, beforeTheEnd + 1, { amountMicros: 1_000 });
    const raced = Array.from({ length: 12 }, (_, i) => beforeTheEnd + 2 + i);
    await Promise.all([
      ...raced.map((taskId, i) => openTask(i % 2 === 0 ? first : second, account, taskId, { amountMicros: 1_000 })),
      ...[1, 2, 3].map((taskId) => second.close(account, { type: "settle", taskId, costMicros: 500, totalTokens: 1, model: "m" }, 0)),
      first.close(account, { type: "release", taskId: 4, reason: "failed" }, 0),
    ]);

    const messages = await moneyMessages(account);
    let openings = 0;
    for (const message of messages) {
      expect(message.epoch, message.subject).toBe(Math.floor(openings / MONEY_EPOCH_OPENINGS));
      if (message.opening) openings += 1;
    }
    const tasks = beforeTheEnd + 1 + raced.length;
    expect(openings).toBe(tasks);
    expect(Math.max(...messages.map(({ epoch }) => epoch))).toBe(1);

    // A cold reader (from the writer's snapshot, then epoch by epoch) and the writers agree on every total.
    const cold = await new AccountLedger(suite.nats).current(account);
    const live = await first.current(account);
    for (const state of [cold, live]) {
      expect(state.reservedMicros).toBe((tasks - 4) * 1_000);
      expect(state.openReservations).toBe(tasks - 4);
      expect(state.balanceMicros).toBe(100_000_000_000 - 3 * 500);
      expect(state.epoch).toBe(1);
      expect(state.epochOpenings).toBe(tasks - MONEY_EPOCH_OPENINGS);
    }
    expect(availableMicros(cold)).toBe(availableMicros(live));
    expect(cold.epochSequence).toBe(live.epochSequence);
  });

  it("given tasks opened in different epochs, then each is read by its id alone and the account's task list has them all", async () => {
    const account = "epochal";
    const taskLog = new TaskLog(suite.nats.js, suite.nats.jsm);
    for (const taskId of [1, MONEY_EPOCH_OPENINGS - 1, MONEY_EPOCH_OPENINGS + 1]) {
      const { events } = await taskLog.read(account, taskId);
      expect(events.map((event) => event.type), `task ${taskId}`).toEqual(["TaskSubmitted"]);
      expect(await taskLog.accountOf(taskId)).toBe(account);
    }
    expect((await accountTaskIds(suite.nats.jsm, account)).length).toBe(MONEY_EPOCH_OPENINGS + 9);
  });

  it("given a writer behind on an epoch (it has not read the epoch's last messages), then its write there is refused", async () => {
    const firstEpoch = (await moneyMessages("epochal")).filter(({ epoch }) => epoch === 0);
    // A writer that had read up to the epoch's second-to-last message: its guard is stale.
    const seq = firstEpoch.at(-2)?.seq ?? 0;
    expect(seq).toBeGreaterThan(0);
    await expect(
      suite.nats.js.publish(ledgerSubject("epochal", 0), "{}", { expect: { lastSubjectSequence: seq, lastSubjectSequenceSubject: epochMoneySubjects("epochal", 0) } }),
    ).rejects.toThrow(/wrong last sequence/);
  });
});
