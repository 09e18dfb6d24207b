import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRICED_CHAT, startChatOnOwnServer, type ChatOnOwnServer } from "./helpers/chatOnOwnServer.ts";

/**
 * A chat's hold is written before anything is relayed. When nobody answers that write in time the request is
 * refused (503), but the write may still land once the server wakes: a hold nobody closes, which would keep the
 * account's money for 30 minutes (chatHoldTtlMs) and refuse its requests meanwhile.
 */
describe("adversarial money: a chat's hold whose write is answered too late", () => {
  let chat: ChatOnOwnServer;
  beforeAll(async () => {
    chat = await startChatOnOwnServer();
    chat.fake.behave({ content: "one two three" });
  });
  afterAll(async () => chat?.stop());

  it("given nats-server frozen when a chat's hold is written, when the request is refused and the server wakes and takes the hold, then the hold is closed at once, free", async () => {
    const client = await chat.clientFor("late-hold");
    // One answered request first: the edge knows the key and has folded the account, so the next hold is written at once.
    await client.chat.completions.create({ model: PRICED_CHAT, messages: [{ role: "user", content: "hi" }] });
    await expect.poll(async () => (await chat.moneyOf("late-hold")).charges.length).toBe(1);
    const before = await chat.moneyOf("late-hold");
    const requestsBefore = chat.fake.stats.requests;
    chat.freeze();
    // Refused while the server is still frozen: nobody answered the hold's write within the client's 5 s.
    const refused = await client.chat.completions.create({ model: PRICED_CHAT, messages: [{ role: "user", content: "hi" }] }).catch((error: unknown) => error);
    chat.thaw();
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect(chat.fake.stats.requests).toBe(requestsBefore);

    // The hold landed when the server woke; an empty charge closes it, and the account can spend its money again.
    await expect.poll(async () => (await chat.moneyOf("late-hold")).openHolds, { timeout: 30_000, interval: 250 }).toBe(0);
    const after = await chat.moneyOf("late-hold");
    expect(after.balanceMicros).toBe(before.balanceMicros);
    expect(after.charges).toHaveLength(2);
    expect(after.charges[1]).toEqual(expect.objectContaining({ data: expect.objectContaining({ costMicros: 0, promptTokens: 0, completionTokens: 0 }) }));
  });
});
