import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startChatOnOwnServer, STREAMED_REPLY, STREAMED_REPLY_MICROS, type ChatOnOwnServer } from "./helpers/chatOnOwnServer.ts";

/** Longer than the client's request timeout (5 s): the charge's first write is answered by nobody. */
const FREEZE_MS = 5_500;

/**
 * A chat's charge whose write is answered too late: the edge writes it again, and the server, taking the first
 * once it wakes, answers the second as a duplicate (a file of its own, beside chatChargeServerLost: the suite
 * runs the two at once).
 */
describe("adversarial money: a chat's charge whose write is answered too late", () => {
  let chat: ChatOnOwnServer;
  beforeAll(async () => {
    chat = await startChatOnOwnServer();
    chat.fake.behave(STREAMED_REPLY);
  });
  afterAll(async () => chat?.stop());

  it("given a charge written while nats-server is frozen past its answer's timeout, when the server wakes and takes the first write, then the second is a duplicate: charged once", async () => {
    const client = await chat.clientFor("late-charge");
    await chat.chatWhile(client, () => chat.freeze());
    await sleep(FREEZE_MS);
    chat.thaw();

    await expect.poll(async () => (await chat.moneyOf("late-charge")).charges.length, { timeout: 30_000, interval: 250 }).toBe(1);
    // The edge's second try reached the server behind the first: once it is answered (at once), still one charge.
    await sleep(300);
    const after = await chat.moneyOf("late-charge");
    expect(after.charges).toHaveLength(1);
    expect(after.openHolds).toBe(0);
    expect(after.balanceMicros).toBe(1_000_000 - STREAMED_REPLY_MICROS);
  });
});
