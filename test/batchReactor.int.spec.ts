import { AckPolicy, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REACTOR_GROUP } from "../infra/jetstreamLayout.ts";
import { startBatchReactor, type BatchReactorOptions } from "../services/shared/batchReactor.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { silentLog } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";

const STREAM = "BATCHES";
const seqs = (batch: readonly JsMsg[]) => batch.map((msg) => msg.seq);

describe("batch reactor", () => {
  let server: { url: string; stop(): Promise<void> };
  let first: Nats;
  let second: Nats;
  beforeAll(async () => {
    server = await startTestNats();
    first = await connectNats(server.url, "reactor-a", { replicas: 1, leaseMs: 1000 });
    second = await connectNats(server.url, "reactor-b");
    await first.jsm.streams.add({ name: STREAM, subjects: ["batch.>"] });
  });
  afterAll(async () => {
    await Promise.all([first?.nc.close(), second?.nc.close()]);
    await server?.stop();
  });

  const addConsumer = async (durable: string, pinned: boolean) =>
    first.jsm.consumers.add(STREAM, {
      durable_name: durable,
      ack_policy: pinned ? AckPolicy.All : AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 1_000_000_000,
      max_deliver: -1,
      // The layout's floor for a reactor's pin (infra/jetstreamLayout.ts): a reader's pulls last half of it.
      ...(pinned ? { priority_groups: [REACTOR_GROUP], priority_policy: "pinned_client" as const, priority_timeout: 2_000_000_000 } : {}),
    });
  /** A batch reactor of the first process on STREAM's consumer `durable`. */
  const reactorOn = (durable: string, handle: BatchReactorOptions["handle"]) => startBatchReactor(first, { stream: STREAM, durable, what: durable, log: silentLog, handle });
  const publish = async (subject: string, count: number) => {
    for (let i = 0; i < count; i++) await first.js.publish(`batch.${subject}`, JSON.stringify({ i }));
  };

  it("with lingerMs, events that trickle in are handed over together, at most one batch per linger", async () => {
    // A stream of its own: the other cases' consumers read every message of theirs.
    await first.jsm.streams.add({ name: "LINGER", subjects: ["linger.>"] });
    await first.jsm.consumers.add("LINGER", { durable_name: "lingering", ack_policy: AckPolicy.All, deliver_policy: DeliverPolicy.All, ack_wait: 1_000_000_000, max_deliver: -1, priority_groups: [REACTOR_GROUP], priority_policy: "pinned_client", priority_timeout: 1_000_000_000 });
    const batches: number[][] = [];
    const reactor = await startBatchReactor(first, { stream: "LINGER", durable: "lingering", what: "linger", log: silentLog, lingerMs: 300, handle: async (batch) => void batches.push(seqs(batch)) });
    const started = performance.now();
    for (let i = 0; i < 12; i++) {
      await first.js.publish("linger.x", JSON.stringify({ i }));
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const publishedMs = performance.now() - started;
    await expect.poll(() => batches.flat().length).toBe(12);
    // 12 events over about 300 ms (more on a busy machine): the first alone, then one batch per 300 ms at most.
    expect(batches.length).toBeLessThanOrEqual(2 + Math.ceil(publishedMs / 300));
    expect(batches.flat()).toEqual([...batches.flat()].sort((x, y) => x - y));
    await reactor.stop();
  });

  it("with a pinned group, one process reads, in order, and another takes over from the last acknowledged batch when it stops", async () => {
    await addConsumer("pinned", true);
    const seenA: number[] = [];
    const seenB: number[] = [];
    const a = await startBatchReactor(first, { stream: STREAM, durable: "pinned", what: "a", log: silentLog, handle: async (batch) => void seenA.push(...seqs(batch)) });
    await publish("pinned", 50);
    await expect.poll(() => seenA.length).toBe(50);
    const b = await startBatchReactor(second, { stream: STREAM, durable: "pinned", what: "b", log: silentLog, handle: async (batch) => void seenB.push(...seqs(batch)) });
    await publish("pinned", 50);
    await expect.poll(() => seenA.length).toBe(100);
    expect(seenB).toEqual([]);
    expect(seenA).toEqual([...seenA].sort((x, y) => x - y));

    await a.stop();
    await publish("pinned", 20);
    // Pinned after the first one's pin times out (2 s here): it starts where the acknowledgements ended.
    await expect.poll(() => seenB.length, { timeout: 10_000 }).toBe(20);
    expect(Math.min(...seenB)).toBe(Math.max(...seenA) + 1);
    await b.stop();
  });

  it("an idle pinned reader keeps its pin: its pulls are renewed within the pin's timeout (2 s pulls against a 2 s pin let it lapse)", async () => {
    await addConsumer("idle", true);
    const unpinned: string[] = [];
    const advisories = first.nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.${STREAM}.idle`, { callback: (_error, msg) => void unpinned.push(msg.string()) });
    const seen: number[] = [];
    const reader = await startBatchReactor(first, { stream: STREAM, durable: "idle", what: "idle", log: silentLog, handle: async (batch) => void seen.push(...seqs(batch)) });
    await publish("idle", 1);
    await expect.poll(() => seen.length).toBeGreaterThan(0);
    // Three pin timeouts without a message.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    await reader.stop();
    advisories.unsubscribe();
    expect(unpinned).toEqual([]);
  });

  /**
   * A stream of its own whose consumer's earlier reader took messages 1-5 and died before acknowledging them;
   * 6-10 came after. Then a new batch reactor reads it: the messages in the order it handled them, once 1-10 are
   * all handled and acknowledged.
   */
  async function takeOverFromDeadReader(name: string, timing: { ackWaitMs: number; pinTimeoutMs: number }): Promise<number[]> {
    await first.jsm.streams.add({ name, subjects: [`${name}.>`], allow_direct: true });
    const [ack_wait, priority_timeout] = [timing.ackWaitMs * 1e6, timing.pinTimeoutMs * 1e6];
    await first.jsm.consumers.add(name, { durable_name: "reading", ack_policy: AckPolicy.All, deliver_policy: DeliverPolicy.All, ack_wait, max_deliver: -1, priority_groups: [REACTOR_GROUP], priority_policy: "pinned_client", priority_timeout });
    for (let i = 1; i <= 5; i++) await first.js.publish(`${name}.x`, String(i));
    const dying = await connectNats(server.url, `reactor-dying-${name}`);
    for await (const _msg of await (await dying.js.consumers.get(name, "reading")).fetch({ max_messages: 5, expires: 2_000, group: REACTOR_GROUP })) void _msg;
    await dying.nc.close();
    for (let i = 6; i <= 10; i++) await first.js.publish(`${name}.x`, String(i));

    const handled: number[] = [];
    const reactor = await startBatchReactor(second, { stream: name, durable: "reading", what: name, log: silentLog, handle: async (batch) => void handled.push(...seqs(batch)) });
    await expect.poll(() => new Set(handled).size, { timeout: 15_000 }).toBe(10);
    await expect.poll(async () => (await first.jsm.consumers.info(name, "reading")).ack_floor.stream_seq).toBe(10);
    await reactor.stop();
    return handled;
  }

  it("given a reader that died holding messages, when another is pinned just as they fall due (the pin's timeout is the ack wait), then it handles them first, in stream order, and skips none", async () => {
    // The server hands the new reader 6-10 first and 1-5 as they fall due, in one pull or across two.
    expect((await takeOverFromDeadReader("TAKEOVER", { ackWaitMs: 1_000, pinTimeoutMs: 1_000 })).slice(0, 10)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("given a reader that died holding messages whose ack wait outlasts its pin, when another takes over, then newer ones wait until the older are due, and those come first", async () => {
    // The pin lapses after 1 s, the dead reader's messages come back after 3: the new reader gets 6-10 alone first.
    expect((await takeOverFromDeadReader("OUTLAST", { ackWaitMs: 3_000, pinTimeoutMs: 1_000 })).slice(0, 10)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("a batch that fails is handed over again, whole, until it goes through, then acknowledged", async () => {
    await addConsumer("retrying", true);
    const handled: number[][] = [];
    let failures = 2;
    const reactor = await startBatchReactor(first, {
      stream: STREAM,
      durable: "retrying",
      what: "retrying",
      log: silentLog,
      handle: async (batch) => {
        handled.push(seqs(batch).filter((seq) => seq > 120));
        if (batch.some((msg) => msg.subject === "batch.poison") && failures-- > 0) throw new Error("not yet");
      },
    });
    await publish("poison", 1);
    await expect.poll(() => handled.filter((batch) => batch.length > 0).length, { timeout: 5_000 }).toBeGreaterThanOrEqual(3);
    const withPoison = handled.filter((batch) => batch.length > 0);
    expect(withPoison[0]).toEqual(withPoison[1]);
    expect(withPoison[1]).toEqual(withPoison[2]);
    // One acknowledgement covered the stream's earlier messages too.
    await expect.poll(async () => (await first.jsm.consumers.info(STREAM, "retrying")).num_ack_pending).toBe(0);
    await reactor.stop();
  });

  it("a batch written behind is acknowledged only once its writes are kept, and none after one that is not", async () => {
    await addConsumer("behind", true);
    const total = (await first.jsm.streams.info(STREAM)).state.messages;
    let keep!: () => void;
    const kept = new Promise<void>((resolve) => (keep = resolve));
    let seen = 0;
    const reactor = await reactorOn("behind", async (batch) => {
      seen += batch.length;
      return { durable: kept };
    });
    await expect.poll(() => seen).toBe(total);
    await publish("behind", 5);
    await expect.poll(() => seen).toBe(total + 5);
    // Handled, held: nothing is acknowledged while the writes are not kept.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await first.jsm.consumers.info(STREAM, "behind")).num_ack_pending).toBe(total + 5);
    keep();
    await expect.poll(async () => (await first.jsm.consumers.info(STREAM, "behind")).num_ack_pending).toBe(0);
    await reactor.stop();

    // Writes that fail: that batch and every later one stay unacknowledged (handed over again after the ack wait).
    await addConsumer("lost", true);
    let handedOver = 0;
    const failing = await reactorOn("lost", async (batch) => {
      handedOver += batch.length;
      return handedOver <= total + 5 ? { durable: Promise.reject(new Error("counter write given up")) } : undefined;
    });
    await expect.poll(() => handedOver).toBeGreaterThanOrEqual(total + 5);
    await publish("lost", 3);
    await expect.poll(() => handedOver).toBeGreaterThanOrEqual(total + 8);
    const info = await first.jsm.consumers.info(STREAM, "lost");
    expect(info.ack_floor.stream_seq).toBe(0);
    await failing.stop();
  });

  it("a consumer made by an older reelay (explicit acks, no group) has every message acknowledged", async () => {
    await addConsumer("legacy", false);
    let seen = 0;
    const reactor = await startBatchReactor(first, { stream: STREAM, durable: "legacy", what: "legacy", log: silentLog, handle: async (batch) => void (seen += batch.length) });
    const total = (await first.jsm.streams.info(STREAM)).state.messages;
    await expect.poll(() => seen).toBe(total);
    await expect.poll(async () => (await first.jsm.consumers.info(STREAM, "legacy")).num_ack_pending).toBe(0);
    await reactor.stop();
  });
});
