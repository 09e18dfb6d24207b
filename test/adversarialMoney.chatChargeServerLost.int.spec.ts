import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startChatOnOwnServer, STREAMED_REPLY, STREAMED_REPLY_MICROS, type ChatOnOwnServer } from "./helpers/chatOnOwnServer.ts";

/**
 * A chat's charge is written after its answer ended, by the edge alone: if that write is lost (nats-server died
 * with it unread, a failover) the hold lapses after 30 minutes and the request was free. The edge writes the
 * charge again until it lands; its msgID makes a write that did land (only its answer was lost) count once.
 */
describe("adversarial money: a chat's charge whose write is lost", () => {
  let chat: ChatOnOwnServer;
  beforeAll(async () => {
    chat = await startChatOnOwnServer();
    chat.fake.behave(STREAMED_REPLY);
  });
  afterAll(async () => chat?.stop());

  it("given a charge written while nats-server is frozen, when the server is killed with it unread and started again, then the charge is written again and lands once", async () => {
    const client = await chat.clientFor("lost-charge");
    await chat.chatWhile(client, () => chat.freeze());
    // The answer ended: its charge is on its way into the frozen server's socket, where it dies with the server.
    await sleep(500);
    await chat.restart();

    await expect.poll(async () => (await chat.moneyOf("lost-charge")).charges.length, { timeout: 30_000, interval: 250 }).toBe(1);
    const after = await chat.moneyOf("lost-charge");
    expect(after.openHolds).toBe(0);
    expect(after.balanceMicros).toBe(1_000_000 - STREAMED_REPLY_MICROS);
  });
});
