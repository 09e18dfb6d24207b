import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { startFakeUpstream, type FakeUpstream } from "./fakes/openaiUpstream.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

// The fake counts 7 prompt tokens and one completion token per word: 7 × 2 + 4 × 8 ¥/M = 46 µ¥.
const FOUR_WORD_REPLY_MICROS = 46;

describe("chat usage is charged on the ledger", () => {
  let app: TestApp;
  let fake: FakeUpstream;
  const clientFor = async (account: string, creditYuan: number) =>
    new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: await app.keyFor(account, creditYuan), maxRetries: 0 });
  const chatCharges = async (account: string) =>
    (await readAccountHistory(app.nats.js, app.nats.jsm, account)).map((entry) => entry.event).filter((event) => event.type === "ChatUsageCharged");

  beforeAll(async () => {
    fake = await startFakeUpstream();
    process.env.REELAY_BILLING_UPSTREAM_KEY = fake.apiKey;
    app = await startTestApp({
      services: ["edge", "projector"],
      tweak: (config) => {
        config.chatModels["priced-gpt"] = {
          provider: "openai-compatible",
          baseUrl: fake.baseUrl,
          apiKeyEnv: "REELAY_BILLING_UPSTREAM_KEY",
          upstreamModel: "fake-upstream-model",
          inputPricePerMillionTokens: 2,
          outputPricePerMillionTokens: 8,
          timeoutMs: 5000,
          maxCompletionTokens: 4096,
        };
      },
    });
    fake.behave({ content: "one two three four" });
  });
  afterAll(async () => {
    await app?.stop();
    await fake?.stop();
  });

  it("a completion's usage becomes one ChatUsageCharged event keyed by its request id", async () => {
    const client = await clientFor("chatter", 1);
    await expect.poll(async () => (await app.nats.balances.get("chatter"))?.operation).toBe("PUT");
    const { response } = await client.chat.completions.create({ model: "priced-gpt", messages: [{ role: "user", content: "hi" }] }).withResponse();
    await expect.poll(() => chatCharges("chatter")).toHaveLength(1);
    expect((await chatCharges("chatter"))[0]).toMatchObject({
      data: { requestId: response.headers.get("x-request-id"), model: "priced-gpt", promptTokens: 7, completionTokens: 4, costMicros: FOUR_WORD_REPLY_MICROS },
    });
    expect((await app.ledger.current("chatter")).balanceMicros).toBe(1_000_000 - FOUR_WORD_REPLY_MICROS);
  });

  it("a stream is charged from its final usage chunk", async () => {
    const client = await clientFor("streamer", 1);
    await expect.poll(async () => (await app.nats.balances.get("streamer"))?.operation).toBe("PUT");
    const stream = await client.chat.completions.create({ model: "priced-gpt", messages: [{ role: "user", content: "hi" }], stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text.trim()).toBe("one two three four");
    await expect.poll(() => chatCharges("streamer")).toHaveLength(1);
    expect((await chatCharges("streamer"))[0]?.data.costMicros).toBe(FOUR_WORD_REPLY_MICROS);
  });

  it("an account with nothing available gets OpenAI's 429 insufficient_quota before any upstream call", async () => {
    const client = await clientFor("broke", 0);
    const before = fake.requests.length;
    const failure = await client.chat.completions.create({ model: "priced-gpt", messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(OpenAI.RateLimitError);
    expect(failure).toMatchObject({ status: 429, type: "insufficient_quota", code: "insufficient_quota" });
    expect((failure as Error).message).toMatch(/^429 You exceeded your current quota.*insufficient balance/);
    // Retrying cannot help until a top-up: the SDKs are told not to (they retry every other 429).
    expect((failure as InstanceType<typeof OpenAI.APIError>).headers?.get("x-should-retry")).toBe("false");
    expect(fake.requests.length).toBe(before);
  });

  it("the free echo model writes nothing to the ledger", async () => {
    const client = await clientFor("echoer", 1);
    await expect.poll(async () => (await app.nats.balances.get("echoer"))?.operation).toBe("PUT");
    const reply = await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "free please" }] });
    expect(reply.choices[0]?.message.content).toBe("free please");
    expect(await chatCharges("echoer")).toEqual([]);
  });
});
