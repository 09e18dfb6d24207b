import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, JetStreamApiError, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer } from "../infra/natsServer.ts";
import { startTestNats } from "./helpers/testNats.ts";

/**
 * What reelay's core builds on, proved against the server the run uses. On nats-server 2.9 each of these
 * options is accepted and silently ignored (the write goes through, the message stays, the schedule never
 * fires): every test here would fail there, which is why an older server is refused at start.
 */
describe("the NATS server honours what reelay relies on", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    server = await startTestNats();
    nc = await connect({ servers: server.url });
    js = jetstream(nc);
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "ACCT", subjects: ["acct.>"], allow_direct: true, allow_msg_ttl: true, allow_msg_schedules: true });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  const lastSequenceOf = async (subject: string) => (await jsm.direct.getMessage("ACCT", { last_by_subj: subject }))?.seq ?? 0;

  it("refuses a write guarded by a stale last sequence of a whole subject tree (lastSubjectSequenceSubject)", async () => {
    const first = await js.publish("acct.a.money.1", "opened 1", { expect: { lastSubjectSequence: 0, lastSubjectSequenceSubject: "acct.a.money.>" } });
    await js.publish("acct.a.money.2", "opened 2", { expect: { lastSubjectSequence: first.seq, lastSubjectSequenceSubject: "acct.a.money.>" } });
    // Another account's writes never conflict with this one's.
    await js.publish("acct.b.money.3", "opened 3", { expect: { lastSubjectSequence: 0, lastSubjectSequenceSubject: "acct.b.money.>" } });

    const stale = js.publish("acct.a.money.4", "opened 4", { expect: { lastSubjectSequence: first.seq, lastSubjectSequenceSubject: "acct.a.money.>" } });
    await expect(stale).rejects.toBeInstanceOf(JetStreamApiError);
    await expect(stale).rejects.toThrow(/wrong last sequence/);
    expect(await lastSequenceOf("acct.a.money.4")).toBe(0);
  });

  it("removes a message when its own TTL has passed (per-message TTL)", async () => {
    await js.publish("acct.a.idem.k1", "claim", { ttl: "1s" });
    await js.publish("acct.a.idem.k2", "kept");
    expect(await lastSequenceOf("acct.a.idem.k1")).toBeGreaterThan(0);
    await expect.poll(() => lastSequenceOf("acct.a.idem.k1"), { timeout: 5_000, interval: 200 }).toBe(0);
    expect(await lastSequenceOf("acct.a.idem.k2")).toBeGreaterThan(0);
  });

  it("delivers a scheduled message at its time, and a cancelled schedule never fires", async () => {
    const at = new Date(Date.now() + 1_000);
    await js.publish("acct.a.sched.deadline.7", "deadline 7", { schedule: { specification: at, target: "acct.a.task.7" } });
    await js.publish("acct.a.sched.deadline.8", "deadline 8", { schedule: { specification: at, target: "acct.a.task.8" } });
    await js.publish("acct.a.task.8", "finished 8", { cancelSchedule: { scheduleSubject: "acct.a.sched.deadline.8" } });

    await expect.poll(() => lastSequenceOf("acct.a.task.7"), { timeout: 5_000, interval: 100 }).toBeGreaterThan(0);
    const fired = await jsm.direct.getMessage("ACCT", { last_by_subj: "acct.a.task.7" });
    expect(fired?.string()).toBe("deadline 7");
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await jsm.direct.getMessage("ACCT", { last_by_subj: "acct.a.task.8" }))?.string()).toBe("finished 8");
  });

  it("filters one consumer by several subjects", async () => {
    await js.publish("acct.c.money.1", "m");
    await js.publish("acct.c.task.1", "t");
    await js.publish("acct.c.other.1", "o");
    await jsm.consumers.add("ACCT", {
      durable_name: "two_filters",
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subjects: ["acct.c.money.>", "acct.c.other.>"],
    });
    const consumer = await js.consumers.get("ACCT", "two_filters");
    const seen: string[] = [];
    for await (const msg of await consumer.fetch({ max_messages: 2, expires: 2_000 })) {
      seen.push(msg.subject);
      msg.ack();
    }
    expect(seen).toEqual(["acct.c.money.1", "acct.c.other.1"]);
  });
});

/**
 * What makes a retried money write land once (a chat's charge, a create with its Idempotency-Key). The server
 * checks a write's guard before its message id: a retry whose first try landed is refused as stale; the writer
 * reads the account again and writes once more with the current guard and the same id, which the server then
 * reports as a duplicate of the first try. It keeps the ids of its duplicate window across a crash.
 */
describe("a message id written before nats-server was killed", () => {
  it("given a guarded write that landed, when the server is killed (SIGKILL) and started on its store, then the same write is refused with its stale guard and is a duplicate with the current one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reelay-dedupe-"));
    let server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    try {
      let nc = await connect({ servers: server.url });
      await (await jetstreamManager(nc)).streams.add({ name: "MONEY", subjects: ["acct.>"], duplicate_window: 120e9 });
      const guardedBy = (lastSubjectSequence: number) => ({ lastSubjectSequence, lastSubjectSequenceSubject: "acct.a.money.>" });
      const landed = await jetstream(nc).publish("acct.a.money.ledger", "charge", { msgID: "chat-r1", expect: guardedBy(0) });
      await nc.close();
      const port = Number(new URL(server.url).port);
      await server.kill("SIGKILL");
      server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {}, port });
      nc = await connect({ servers: server.url });
      const js = jetstream(nc);
      // The retry as first sent: its guard (0) is stale since the first try landed.
      await expect(js.publish("acct.a.money.ledger", "charge", { msgID: "chat-r1", expect: guardedBy(0) })).rejects.toThrow(/wrong last sequence/);
      // Decided again on the account as it is now: the same id, the current guard.
      expect(await js.publish("acct.a.money.ledger", "charge", { msgID: "chat-r1", expect: guardedBy(landed.seq) })).toMatchObject({ duplicate: true, seq: landed.seq });
      await nc.close();
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
