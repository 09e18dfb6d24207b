import { setTimeout as sleep } from "node:timers/promises";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRICED_CHAT, startChatOnOwnServer, type ChatOnOwnServer } from "./helpers/chatOnOwnServer.ts";

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
  let chat: ChatOnOwnServer;
  beforeAll(async () => {
    chat = await startChatOnOwnServer();
    chat.fake.behave({ content: REPLY, chunkDelayMs: CHUNK_MS });
  });
  afterAll(async () => chat?.stop());

  /** Streams a chat; `whileStreaming` runs once its first chunk is in; resolves when the answer has ended. */
  async function chatWhile(client: OpenAI, whileStreaming: () => void): Promise<void> {
    const stream = await client.chat.completions.create({ model: PRICED_CHAT, messages: [{ role: "user", content: "count to six" }], stream: true, stream_options: { include_usage: true } });
    let first = true;
    for await (const _chunk of stream) {
      if (first) whileStreaming();
      first = false;
    }
  }

  it("given a charge written while nats-server is frozen, when the server is killed with it unread and started again, then the charge is written again and lands once", async () => {
    const client = await chat.clientFor("lost-charge");
    await chatWhile(client, () => chat.freeze());
    // The answer ended: its charge is on its way into the frozen server's socket, where it dies with the server.
    await sleep(500);
    await chat.restart();

    await expect.poll(async () => (await chat.moneyOf("lost-charge")).charges.length, { timeout: 30_000, interval: 250 }).toBe(1);
    const after = await chat.moneyOf("lost-charge");
    expect(after.openHolds).toBe(0);
    expect(after.balanceMicros).toBe(1_000_000 - REPLY_MICROS);
  });

  it("given a charge written while nats-server is frozen past its answer's timeout, when the server wakes and takes the first write, then the second is a duplicate: charged once", async () => {
    const client = await chat.clientFor("late-charge");
    await chatWhile(client, () => chat.freeze());
    await sleep(FREEZE_MS);
    chat.thaw();

    await expect.poll(async () => (await chat.moneyOf("late-charge")).charges.length, { timeout: 30_000, interval: 250 }).toBe(1);
    // The edge's second try reached the server behind the first: once it is answered (at once), still one charge.
    await sleep(300);
    const after = await chat.moneyOf("late-charge");
    expect(after.charges).toHaveLength(1);
    expect(after.openHolds).toBe(0);
    expect(after.balanceMicros).toBe(1_000_000 - REPLY_MICROS);
  });
});
