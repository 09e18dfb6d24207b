import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startNatsServer, type RunningNatsServer } from "../../infra/natsServer.ts";
import { AccountLedger } from "../../services/billing/accountLedger.ts";
import { readAccountHistory } from "../../services/billing/ledgerReader.ts";
import { startEdge } from "../../services/edge/main.ts";
import { ApiKeyStore } from "../../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../../services/shared/nats.ts";
import { startFakeUpstream, type FakeUpstream } from "../fakes/openaiUpstream.ts";
import { silentLog, testConfig } from "./testApp.ts";

/** The priced chat model these tests use: 2 ¥ per million prompt tokens, 8 per million completion tokens. */
export const PRICED_CHAT = "priced-gpt";
/** A streamed reply, one word per chunk, a chunk every 50 ms: it outlives the moment a test freezes the server. */
export const STREAMED_REPLY = { content: "one two three four five six", chunkDelayMs: 50 };
/** What it costs: the fake counts 7 prompt tokens and one completion token per word, 7 × 2 + 6 × 8 µ¥ per million. */
export const STREAMED_REPLY_MICROS = 62;

export interface ChatOnOwnServer {
  /** The nats-server as it runs now (`restart` replaces it). */
  server(): RunningNatsServer;
  nats: Nats;
  fake: FakeUpstream;
  /** An OpenAI client (no retries) for a new account holding 1 yuan. */
  clientFor(account: string): Promise<OpenAI>;
  /** The account's chat charges, open holds and balance, read from its ledger. */
  moneyOf(account: string): Promise<{ charges: unknown[]; openHolds: number; balanceMicros: number }>;
  /** Kills nats-server (SIGKILL) and starts it again on its store and port. */
  restart(): Promise<void>;
  freeze(): void;
  thaw(): void;
  /** Streams a chat of the priced model; `whileStreaming` runs once its first chunk is in; resolves when the answer has ended. */
  chatWhile(client: OpenAI, whileStreaming: () => void): Promise<void>;
  stop(): Promise<void>;
}

/**
 * An edge with a priced chat model relayed to the fake OpenAI upstream, on a nats-server of its own that a
 * test may freeze (SIGSTOP), thaw, or kill and start again on its store.
 */
export async function startChatOnOwnServer(): Promise<ChatOnOwnServer> {
  const dir = mkdtempSync(join(tmpdir(), "reelay-chat-server-"));
  let server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
  const fake = await startFakeUpstream();
  process.env.REELAY_OWN_SERVER_UPSTREAM_KEY = fake.apiKey;
  const config = testConfig((c) => {
    c.chatModels[PRICED_CHAT] = {
      provider: "openai-compatible",
      baseUrl: fake.baseUrl,
      apiKeyEnv: "REELAY_OWN_SERVER_UPSTREAM_KEY",
      upstreamModel: "fake-upstream-model",
      inputPricePerMillionTokens: 2,
      outputPricePerMillionTokens: 8,
      timeoutMs: 30_000,
      maxCompletionTokens: 64,
    };
  });
  const nats = await connectNats(server.url, "chat-own-server-test", { replicas: 1, leaseMs: config.runner.leaseMs });
  const edge = await startEdge(nats, config, silentLog, { host: "127.0.0.1", port: 0, publicUrl: undefined });
  const baseUrl = `http://127.0.0.1:${edge.port}`;
  const signal = (name: NodeJS.Signals) => process.kill(-server.pid, name);
  return {
    server: () => server,
    nats,
    fake,
    clientFor: async (account) => {
      const ledger = new AccountLedger(nats);
      await ledger.execute(account, { type: "open" });
      await ledger.execute(account, { type: "credit", amountMicros: 1_000_000, creditId: `${account}-credit` });
      return new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: (await new ApiKeyStore(nats.apiKeys).create(account)).key, maxRetries: 0 });
    },
    moneyOf: async (account) => {
      const events = (await readAccountHistory(nats.js, nats.jsm, account)).map((entry) => entry.event);
      const state = await new AccountLedger(nats).current(account);
      return { charges: events.filter((event) => event.type === "ChatUsageCharged"), openHolds: state.chatReservations.size, balanceMicros: state.balanceMicros };
    },
    restart: async () => {
      const port = Number(new URL(server.url).port);
      await server.kill("SIGKILL");
      server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {}, port });
    },
    freeze: () => signal("SIGSTOP"),
    thaw: () => signal("SIGCONT"),
    chatWhile: async (client, whileStreaming) => {
      const stream = await client.chat.completions.create({ model: PRICED_CHAT, messages: [{ role: "user", content: "count to six" }], stream: true, stream_options: { include_usage: true } });
      let first = true;
      for await (const _chunk of stream) {
        if (first) whileStreaming();
        first = false;
      }
    },
    stop: async () => {
      signal("SIGCONT");
      await edge.stop().catch(() => undefined);
      await nats.nc.close().catch(() => undefined);
      await server.stop();
      await fake.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
