import { countTokens } from "gpt-tokenizer/encoding/o200k_base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRICED_MODEL, startPricedChat, type PricedChat } from "./helpers/pricedChat.ts";

/**
 * Issue 32: "Chat is free for a client that hangs up early. A streamed answer read to its second-last chunk
 * and then dropped is charged 0: the upstream billed us, the customer got the content. Same when an upstream
 * omits usage." Whatever was relayed is charged: the upstream's usage when it comes, else tokens counted
 * from what reelay relayed.
 */
describe("adversarial money: chat is never free for a client that hangs up or an upstream that omits usage", () => {
  let chat: PricedChat;
  const ask = [{ role: "user" as const, content: "tell me eight words" }];
  const EIGHT_WORDS = "alpha bravo charlie delta echo foxtrot golf hotel";

  beforeAll(async () => {
    chat = await startPricedChat();
  });
  afterAll(async () => {
    await chat?.stop();
  });

  it("a stream read to its second-last chunk and then dropped is charged for what it got", async () => {
    chat.fake.behave({ content: EIGHT_WORDS, chunkDelayMs: 40 });
    const client = await chat.clientFor("hangs-up", 1_000_000);
    const abort = new AbortController();
    const { data: stream, response } = await client.chat.completions.create({ model: PRICED_MODEL, messages: ask, stream: true }, { signal: abort.signal }).withResponse();
    const requestId = response.headers.get("x-request-id");
    let words = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content?.trim()) words++;
      if (words === 7) {
        abort.abort();
        break;
      }
    }
    await expect.poll(() => chat.moneyEvents("hangs-up", "ChatUsageCharged"), { timeout: 5000 }).toHaveLength(1);
    const [charge] = await chat.moneyEvents("hangs-up", "ChatUsageCharged");
    expect(charge?.data).toMatchObject({ requestId, counted: true });
    // Seven words read (the eighth may have been on its way when the client left), counted with o200k.
    expect(charge?.data.completionTokens).toBeGreaterThanOrEqual(countTokens(EIGHT_WORDS.split(" ").slice(0, 7).join(" ")));
    expect(charge?.data.completionTokens).toBeLessThanOrEqual(countTokens(EIGHT_WORDS));
    expect(charge?.data.promptTokens).toBeGreaterThan(0);
    expect(charge?.data.costMicros).toBeGreaterThan(0);
    expect((await chat.app.ledger.current("hangs-up")).reservedMicros).toBe(0);
  });

  it("a stream whose upstream sends no usage is charged on the tokens counted from what was relayed", async () => {
    chat.fake.behave({ content: EIGHT_WORDS, omitUsage: true });
    const client = await chat.clientFor("no-usage-stream", 1_000_000);
    const stream = await client.chat.completions.create({ model: PRICED_MODEL, messages: ask, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text.trim()).toBe(EIGHT_WORDS);
    await expect.poll(() => chat.moneyEvents("no-usage-stream", "ChatUsageCharged"), { timeout: 5000 }).toHaveLength(1);
    const [charge] = await chat.moneyEvents("no-usage-stream", "ChatUsageCharged");
    expect(charge?.data).toMatchObject({ counted: true, completionTokens: countTokens(EIGHT_WORDS) });
    expect(charge?.data.costMicros).toBeGreaterThan(0);
  });

  it("a completion without usage is charged on the tokens counted from its answer", async () => {
    chat.fake.behave({ content: EIGHT_WORDS, omitUsage: true });
    const client = await chat.clientFor("no-usage-json", 1_000_000);
    const reply = await client.chat.completions.create({ model: PRICED_MODEL, messages: ask });
    expect(reply.choices[0]?.message.content).toBe(EIGHT_WORDS);
    await expect.poll(() => chat.moneyEvents("no-usage-json", "ChatUsageCharged"), { timeout: 5000 }).toHaveLength(1);
    const [charge] = await chat.moneyEvents("no-usage-json", "ChatUsageCharged");
    expect(charge?.data).toMatchObject({ counted: true, completionTokens: countTokens(EIGHT_WORDS) });
  });

  it("the upstream's usage, when it comes, is what is charged (and the reservation is freed)", async () => {
    chat.fake.behave({ content: EIGHT_WORDS });
    const client = await chat.clientFor("usage-wins", 1_000_000);
    await client.chat.completions.create({ model: PRICED_MODEL, messages: ask });
    await expect.poll(() => chat.moneyEvents("usage-wins", "ChatUsageCharged"), { timeout: 5000 }).toHaveLength(1);
    const [charge] = await chat.moneyEvents("usage-wins", "ChatUsageCharged");
    // The fake reports 7 prompt tokens and one per word: 7 × 2 + 8 × 8 µ¥.
    expect(charge?.data).toMatchObject({ promptTokens: 7, completionTokens: 8, costMicros: 78 });
    expect(charge?.data.counted).toBeUndefined();
    expect(await chat.app.ledger.current("usage-wins")).toMatchObject({ balanceMicros: 1_000_000 - 78, reservedMicros: 0 });
  });
});
