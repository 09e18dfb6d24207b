import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { startFakeUpstream, type FakeUpstream } from "./fakes/openaiUpstream.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

const CHATS_PER_ACCOUNT = 3;

/** One tenant's flood of long chat answers cannot hold every relay of the upstream key all tenants share. */
describe("adversarial chat: one account's flood of long answers", () => {
  let app: TestApp;
  let fake: FakeUpstream;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    fake = await startFakeUpstream();
    process.env.REELAY_FLOOD_UPSTREAM_KEY = fake.apiKey;
    app = await startTestApp({
      services: ["edge", "projector"],
      tweak: (config) => {
        config.limits.chatRequestsPerAccount = CHATS_PER_ACCOUNT;
        config.chatModels["shared-gpt"] = {
          provider: "openai-compatible",
          baseUrl: fake.baseUrl,
          apiKeyEnv: "REELAY_FLOOD_UPSTREAM_KEY",
          upstreamModel: "fake-upstream-model",
          inputPricePerMillionTokens: 2,
          outputPricePerMillionTokens: 8,
          timeoutMs: 30_000,
          maxCompletionTokens: 64,
        };
      },
    });
    for (const account of ["flooder", "neighbour"]) keys[account] = await app.keyFor(account, 10);
    // Every answer is a long one: the upstream does not answer until the client gives up.
    fake.behave({ hang: true });
  });
  afterAll(async () => {
    await app?.stop();
    await fake?.stop();
  });

  const chat = (account: string) => {
    const abort = new AbortController();
    const answer = fetch(`${app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${keys[account]}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "shared-gpt", messages: [{ role: "user", content: "a long answer, please" }], stream: true }),
      signal: abort.signal,
    }).catch((error: unknown) => error);
    return { answer, close: () => abort.abort() };
  };
  /** A request the upstream received ("relayed", its answer still to come), or one answered 429 at the edge. */
  const relayedOrRefused = async (answer: Promise<unknown>): Promise<"relayed" | "refused"> => {
    const before = fake.requests.length;
    let refused = false;
    void answer.then((response) => (refused = response instanceof Response && response.status === 429));
    await expect.poll(() => refused || fake.requests.length > before).toBe(true);
    return refused ? "refused" : "relayed";
  };
  const reservations = async (account: string) =>
    (await readAccountHistory(app.nats.js, app.nats.jsm, account)).filter((entry) => entry.event.type === "ChatReserved").length;

  it("gets 429 (OpenAI's rate_limit_exceeded, nothing held) past its share in flight; a neighbour is relayed, and a hang-up frees a place", async () => {
    const held = Array.from({ length: CHATS_PER_ACCOUNT }, () => chat("flooder"));
    await expect.poll(() => fake.requests.length).toBe(CHATS_PER_ACCOUNT);

    const refused = await fetch(`${app.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${keys.flooder}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "shared-gpt", messages: [{ role: "user", content: "one more" }] }),
    });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({
      error: {
        message: expect.stringMatching(/^Too many chat completions in flight for this account \(at most 3 at once per gateway node\)/),
        type: "requests",
        param: null,
        code: "rate_limit_exceeded",
      },
    });
    expect(fake.requests).toHaveLength(CHATS_PER_ACCOUNT);
    expect(await reservations("flooder")).toBe(CHATS_PER_ACCOUNT);

    const neighbour = chat("neighbour");
    await expect.poll(() => fake.requests.length).toBe(CHATS_PER_ACCOUNT + 1);
    neighbour.close();

    // A client that hangs up gives its place back (its hold is closed as one that relayed nothing).
    held[0]?.close();
    await expect.poll(async () => {
      const again = chat("flooder");
      const outcome = await relayedOrRefused(again.answer);
      if (outcome === "refused") again.close();
      else held.push(again);
      return outcome;
    }).toBe("relayed");
    for (const request of held) request.close();
  });
});
