import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRICED_MODEL, startPricedChat, type PricedChat } from "./helpers/pricedChat.ts";

/**
 * Issue 32: "chat passthrough fields that raise upstream cost (service_tier, …) go unpriced". reelay prices
 * tokens at the model's standard prices, so a field that makes the upstream bill us more is refused (400
 * naming it) before anything is held or sent upstream; the standard tier's names still pass.
 */
describe("adversarial money: fields that make the upstream bill more are refused, not relayed unpriced", () => {
  let chat: PricedChat;
  let client: OpenAI;
  const messages = [{ role: "user" as const, content: "hi" }];

  beforeAll(async () => {
    chat = await startPricedChat();
    client = await chat.clientFor("tier-shopper", 1_000_000);
  });
  afterAll(async () => {
    await chat?.stop();
  });

  const refusal = (extra: Record<string, unknown>) =>
    client.chat.completions.create({ model: PRICED_MODEL, messages, ...extra } as OpenAI.ChatCompletionCreateParamsNonStreaming).catch((error: unknown) => error);

  it.each([
    ["service_tier", { service_tier: "priority" }],
    ["service_tier", { service_tier: "scale" }],
    ["service_tier", { service_tier: "flex" }],
    ["web_search_options", { web_search_options: { search_context_size: "high" } }],
    ["audio", { audio: { voice: "alloy", format: "mp3" } }],
    ["modalities", { modalities: ["text", "audio"] }],
  ])("%s %j → 400 naming the field, nothing sent upstream", async (param, extra) => {
    const before = chat.fake.requests.length;
    const error = await refusal(extra);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, param: expect.stringContaining(param) });
    expect(chat.fake.requests.length).toBe(before);
  });

  it("the standard tier passes, under either of its names", async () => {
    for (const tier of ["auto", "default"] as const) {
      const reply = await client.chat.completions.create({ model: PRICED_MODEL, messages, service_tier: tier });
      expect(reply.choices[0]?.message.content).toBeTruthy();
      expect(chat.fake.requests.at(-1)?.body.service_tier).toBe(tier);
    }
  });
});
