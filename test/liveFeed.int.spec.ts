import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer } from "../infra/natsServer.ts";
import { FEED_SILENCE_MS, feedClient, OrderedFeed } from "../services/shared/liveFeed.ts";
import { silentLog } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";

/** Every feed's promise: a consumer lost under it is replaced within 2 s, from where it was. */
const REOPENED_WITHIN_MS = 2_000;

describe("a live feed on an ordered consumer", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;
  beforeAll(async () => {
    server = await startTestNats();
    nc = await connect({ servers: server.url });
    js = jetstream(nc);
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  /** A stream of its own with `count` messages already in it; the feed follows it from `from`. */
  async function world(stream: string, count: number, from: number) {
    await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
    for (let i = 1; i <= count; i++) await js.publish(`${stream}.n`, String(i));
    const taken: number[] = [];
    const opened: number[] = [];
    const behind: boolean[] = [];
    /** The feed's own reason at each change (undefined: current), read when it is told, not sampled. */
    const reasons: (string | undefined)[] = [];
    const feed: OrderedFeed = new OrderedFeed({
      what: stream,
      log: silentLog,
      from,
      open: (position) => {
        opened.push(position);
        return js.consumers.get(stream, { filter_subjects: [`${stream}.>`], deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: position + 1 });
      },
      take: (msg) => void taken.push(Number(msg.string())),
      onBehind: (isBehind) => {
        behind.push(isBehind);
        reasons.push(feed.behindReason());
      },
    });
    const consumerNames = async () => {
      const names: string[] = [];
      for await (const info of jsm.consumers.list(stream)) names.push(info.name);
      return names;
    };
    return { feed, taken, opened, behind, reasons, consumerNames, append: (n: number) => js.publish(`${stream}.n`, String(n)) };
  }

  it("given a running feed, when its consumer is deleted under it while events keep coming, then it opens a new one within 2 s after the last event it took, and takes every event once, in order", async () => {
    const { feed, taken, opened, consumerNames, append } = await world("LOST", 5, 2);
    await feed.start();
    await expect.poll(() => taken).toEqual([3, 4, 5]);
    expect(feed.behindReason()).toBeUndefined();

    const [lost] = await consumerNames();
    if (!lost) throw new Error("no consumer");
    await jsm.consumers.delete("LOST", lost);
    const deletedAt = performance.now();
    for (let n = 6; n <= 10; n++) await append(n);

    await expect.poll(() => opened.length, { timeout: REOPENED_WITHIN_MS, interval: 10 }).toBe(2);
    expect(performance.now() - deletedAt).toBeLessThan(REOPENED_WITHIN_MS);
    expect(opened).toEqual([2, 5]);
    await expect.poll(() => taken).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
    await expect.poll(() => feed.behindReason()).toBeUndefined();
    expect(await consumerNames()).not.toContain(lost);
    feed.stop();
  });

  it("given a feed whose consumer was lost, then it is behind from the loss until its new consumer has caught up, and says why", async () => {
    const { feed, behind, reasons, consumerNames } = await world("BEHIND", 3, 0);
    await feed.start();
    await expect.poll(() => feed.behindReason()).toBeUndefined();
    const [lost] = await consumerNames();
    if (!lost) throw new Error("no consumer");
    await jsm.consumers.delete("BEHIND", lost);
    // Read from the changes the feed tells, not by sampling: a reopen can take less than any poll interval.
    await expect.poll(() => behind, { timeout: 2 * REOPENED_WITHIN_MS }).toEqual([false, true, false]);
    // Current once it ran, behind at the loss and saying why, current again: each change told once.
    expect(reasons).toEqual([undefined, "is not open", undefined]);
    expect(feed.behindReason()).toBeUndefined();
    feed.stop();
  });

  it("given an idle feed, then its server's heartbeats keep it current: silence alone never makes it behind while its consumer lives", async () => {
    const { feed } = await world("IDLE", 1, 1);
    await feed.start();
    await expect.poll(() => feed.behindReason()).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, FEED_SILENCE_MS + 500));
    expect(feed.behindReason()).toBeUndefined();
    feed.stop();
  });

  it("given a running feed, when its server stops answering (frozen) for longer than 2 s, then it is behind, and once the server answers it runs again from where it was", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reelay-frozen-"));
    const frozen = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    const frozenNc = await connect({ servers: frozen.url });
    try {
      const frozenJs = jetstream(frozenNc);
      await (await jetstreamManager(frozenNc)).streams.add({ name: "FROZEN", subjects: ["FROZEN.>"] });
      await frozenJs.publish("FROZEN.n", "1");
      const taken: number[] = [];
      const feed = new OrderedFeed({
        what: "frozen",
        log: silentLog,
        from: 0,
        open: (position) => feedClient(frozenNc).consumers.get("FROZEN", { filter_subjects: ["FROZEN.>"], deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: position + 1 }),
        take: (msg) => void taken.push(Number(msg.string())),
      });
      await feed.start();
      await expect.poll(() => taken).toEqual([1]);
      process.kill(-frozen.pid, "SIGSTOP");
      const frozenAt = performance.now();
      await expect.poll(() => feed.behindReason(), { timeout: 3_000, interval: 20 }).toBeDefined();
      expect(performance.now() - frozenAt).toBeLessThan(FEED_SILENCE_MS + 500);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      process.kill(-frozen.pid, "SIGCONT");
      await frozenJs.publish("FROZEN.n", "2");
      await expect.poll(() => feed.behindReason(), { timeout: 3_000 }).toBeUndefined();
      await expect.poll(() => taken).toEqual([1, 2]);
      feed.stop();
    } finally {
      process.kill(-frozen.pid, "SIGCONT");
      await frozenNc.close();
      await frozen.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
