import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { startEdge } from "../services/edge/main.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { startFakeUpstream, type FakeUpstream } from "./fakes/openaiUpstream.ts";
import { silentLog, testConfig } from "./helpers/testApp.ts";

/** Longer than the client's request timeout (5 s): the charge's first write is answered by nobody. */
const FREEZE_MS = 5_500;
/** The reply, one word per chunk, a chunk every CHUNK_MS: the stream outlives the moment the server freezes. */
const REPLY = "one two three four five six";
const CHUNK_MS = 50;
/** The fake counts 7 prompt tokens and one completion token per word: 7 × 2 + 6 × 8 µ¥ per token per million. */
const REPLY_MICROS = 62;

/**
 * A chat's charge is written after its answer ended, by the edge alone: if that write is lost (nats-server died
 * with it unread, a failover) the hold lapses after 30 minutes and the request was free. The edge writes the
 * charge again until it lands; its msgID makes a write that did land (only its answer was lost) count once.
 */
describe("adversarial money: a chat's charge whose write is lost or unanswered", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-chat-charge-"));
  let server: RunningNatsServer;
  let nats: Nats;
  let fake: FakeUpstream;
  let baseUrl: string;
  const stops: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    fake = await startFakeUpstream();
    process.env.REELAY_CHARGE_UPSTREAM_KEY = fake.apiKey;
    const config = testConfig((c) => {
      c.chatModels["priced-gpt"] = {
        provider: "openai-compatible",
        baseUrl: fake.baseUrl,
        apiKeyEnv: "REELAY_CHARGE_UPSTREAM_KEY",
        upstreamModel: "fake-upstream-model",
        inputPricePerMillionTokens: 2,
        outputPricePerMillionTokens: 8,
        timeoutMs: 30_000,
        maxCompletionTokens: 64,
      };
    });
    nats = await connectNats(server.url, "chat-charge-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    stops.push(() => nats.nc.close());
    const edge = await startEdge(nats, config, silentLog, { host: "127.0.0.1", port: 0, publicUrl: undefined });
    stops.unshift(edge.stop);
    baseUrl = `http://127.0.0.1:${edge.port}`;
    fake.behave({ content: REPLY, chunkDelayMs: CHUNK_MS });
  });
  afterAll(async () => {
    process.kill(-server.pid, "SIGCONT");
    for (const stop of stops) await stop().catch(() => undefined);
    await server?.stop();
    await fake?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const clientFor = async (account: string) => {
    const ledger = new AccountLedger(nats);
    await ledger.execute(account, { type: "open" });
    await ledger.execute(account, { type: "credit", amountMicros: 1_000_000, creditId: `${account}-credit` });
    return new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: (await new ApiKeyStore(nats.apiKeys).create(account)).key, maxRetries: 0 });
  };
  const moneyOf = async (account: string) => {
    const events = (await readAccountHistory(nats.js, nats.jsm, account)).map((entry) => entry.event);
    const account_ = await new AccountLedger(nats).current(account);
    return { charges: events.filter((event) => event.type === "ChatUsageCharged"), openHolds: account_.chatReservations.size, balanceMicros: account_.balanceMicros };
  };

  /** Streams a chat; `whileStreaming` runs once its first chunk is in; resolves when the answer has ended. */
  async function chatWhile(client: OpenAI, whileStreaming: () => void): Promise<void> {
    const stream = await client.chat.completions.create({ model: "priced-gpt", messages: [{ role: "user", content: "count to six" }], stream: true, stream_options: { include_usage: true } });
    let first = true;
    for await (const _chunk of stream) {
      if (first) whileStreaming();
      first = false;
    }
  }

  it("given a charge written while nats-server is frozen, when the server is killed with it unread and started again, then the charge is written again and lands once", async () => {
    const client = await clientFor("lost-charge");
    await chatWhile(client, () => process.kill(-server.pid, "SIGSTOP"));
    // The answer ended: its charge is on its way into the frozen server's socket, where it dies with the server.
    await sleep(500);
    const port = Number(new URL(server.url).port);
    await server.kill("SIGKILL");
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {}, port });

    await expect.poll(async () => (await moneyOf("lost-charge")).charges.length, { timeout: 30_000, interval: 250 }).toBe(1);
    const after = await moneyOf("lost-charge");
    expect(after.openHolds).toBe(0);
    expect(after.balanceMicros).toBe(1_000_000 - REPLY_MICROS);
  });

  it("given a charge written while nats-server is frozen past its answer's timeout, when the server wakes and takes the first write, then the second is a duplicate: charged once", async () => {
    const client = await clientFor("late-charge");
    await chatWhile(client, () => process.kill(-server.pid, "SIGSTOP"));
    await sleep(FREEZE_MS);
    process.kill(-server.pid, "SIGCONT");

    await expect.poll(async () => (await moneyOf("late-charge")).charges.length, { timeout: 30_000, interval: 250 }).toBe(1);
    // The edge's second try reached the server behind the first: once it is answered (at once), still one charge.
    await sleep(300);
    const after = await moneyOf("late-charge");
    expect(after.charges).toHaveLength(1);
    expect(after.openHolds).toBe(0);
    expect(after.balanceMicros).toBe(1_000_000 - REPLY_MICROS);
  });
});
