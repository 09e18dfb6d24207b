import OpenAI from "openai";
import type { LedgerEvent } from "../../contracts/ledger.ts";
import { readAccountHistory } from "../../services/billing/ledgerReader.ts";
import { startFakeUpstream, type FakeUpstream } from "../fakes/openaiUpstream.ts";
import { startTestApp, type TestApp } from "./testApp.ts";

/** The priced model these tests chat with: 2 ¥ per million prompt tokens, 8 per million completion tokens. */
export const PRICED_MODEL = "priced-gpt";

export interface PricedChat {
  app: TestApp;
  fake: FakeUpstream;
  /** An OpenAI client for a new account holding `micros` µ¥ (no retries: each request is the test's own). */
  clientFor(account: string, micros: number): Promise<OpenAI>;
  /** The account's money events of these types, in order. */
  moneyEvents<T extends LedgerEvent["type"]>(account: string, ...types: T[]): Promise<Array<Extract<LedgerEvent, { type: T }>>>;
  stop(): Promise<void>;
}

/** A reelay (edge and projector) with a priced chat model relayed to the fake OpenAI upstream. */
export async function startPricedChat(options: { admin?: boolean } = {}): Promise<PricedChat> {
  const fake = await startFakeUpstream();
  process.env.REELAY_MONEY_UPSTREAM_KEY = fake.apiKey;
  const app = await startTestApp({
    services: ["edge", "projector"],
    ...(options.admin ? { admin: true } : {}),
    tweak: (config) => {
      config.chatModels[PRICED_MODEL] = {
        provider: "openai-compatible",
        baseUrl: fake.baseUrl,
        apiKeyEnv: "REELAY_MONEY_UPSTREAM_KEY",
        upstreamModel: "fake-upstream-model",
        inputPricePerMillionTokens: 2,
        outputPricePerMillionTokens: 8,
        timeoutMs: 5000,
        maxCompletionTokens: 4096,
      };
    },
  });
  return {
    app,
    fake,
    async clientFor(account, micros) {
      await app.ledger.execute(account, { type: "open" });
      if (micros > 0) await app.ledger.execute(account, { type: "credit", amountMicros: micros, creditId: `test-${account}` });
      const key = await app.keyFor(account, 0);
      return new OpenAI({ baseURL: `${app.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
    },
    async moneyEvents<T extends LedgerEvent["type"]>(account: string, ...types: T[]) {
      const history = await readAccountHistory(app.nats.js, app.nats.jsm, account);
      return history.map((entry) => entry.event).filter((event): event is Extract<LedgerEvent, { type: T }> => (types as string[]).includes(event.type));
    },
    async stop() {
      await app.stop();
      await fake.stop();
    },
  };
}
