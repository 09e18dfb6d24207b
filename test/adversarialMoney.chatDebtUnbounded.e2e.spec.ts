import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRICED_MODEL, startPricedChat, type PricedChat } from "./helpers/pricedChat.ts";

/**
 * Issue 32: "Chat debt has no bound. An account with 0.000001 yuan ran 5 concurrent streamed chats and ended
 * at −0.245 yuan; concurrency × max_tokens decides the loss." Each request holds its most before relaying,
 * guarded by the account's money, so balance + credit limit bounds the debt under any concurrency.
 */
describe("adversarial money: concurrent chats cannot take an account below its credit limit", () => {
  let chat: PricedChat;
  const LONG_ANSWER = Array.from({ length: 400 }, (_, i) => `word${i}`).join(" ");
  const streamAll = async (client: Awaited<ReturnType<PricedChat["clientFor"]>>, maxTokens?: number) => {
    const stream = await client.chat.completions.create({
      model: PRICED_MODEL,
      messages: [{ role: "user", content: "write at length" }],
      stream: true,
      ...(maxTokens ? { max_tokens: maxTokens } : {}),
    });
    for await (const chunk of stream) void chunk;
  };

  beforeAll(async () => {
    chat = await startPricedChat();
    chat.fake.behave({ content: LONG_ANSWER });
  });
  afterAll(async () => {
    await chat?.stop();
  });

  it("an account with 0.000001 yuan running 5 streamed chats at once gets 429 insufficient_quota and no debt", async () => {
    const client = await chat.clientFor("nearly-broke", 1);
    const outcomes = await Promise.allSettled(Array.from({ length: 5 }, () => streamAll(client)));
    expect(outcomes.map((outcome) => outcome.status)).toEqual(Array(5).fill("rejected"));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ reason: { status: 429, code: "insufficient_quota" } });
    expect(chat.fake.requests.filter((request) => request.body.model === "fake-upstream-model")).toHaveLength(0);
    expect(await chat.app.ledger.current("nearly-broke")).toMatchObject({ balanceMicros: 1, reservedMicros: 0 });
  });

  it("with a credit limit, concurrent chats run as far as balance + limit holds their most, never past it", async () => {
    const client = await chat.clientFor("on-credit", 10_000);
    // Each request holds its prompt and 1,000 answer tokens at 8 ¥/M (8,000 µ¥ and a little): two fit in 10,000 + 8,000.
    await chat.app.ledger.execute("on-credit", { type: "setCreditLimit", limitMicros: 8_000, changeId: "test" });
    // Answers that take a while: every request has asked for its hold before any of them is charged.
    chat.fake.behave({ content: LONG_ANSWER, chunkDelayMs: 1 });
    const outcomes = await Promise.allSettled(Array.from({ length: 6 }, () => streamAll(client, 1_000)));
    const served = outcomes.filter((outcome) => outcome.status === "fulfilled").length;
    expect(served).toBe(2);
    await expect.poll(async () => (await chat.app.ledger.current("on-credit")).reservedMicros, { timeout: 5000 }).toBe(0);
    const after = await chat.app.ledger.current("on-credit");
    const charges = await chat.moneyEvents("on-credit", "ChatUsageCharged");
    expect(charges).toHaveLength(2);
    expect(after.balanceMicros).toBe(10_000 - charges.reduce((sum, charge) => sum + charge.data.costMicros, 0));
    expect(after.balanceMicros).toBeGreaterThanOrEqual(-8_000);
  });
});
