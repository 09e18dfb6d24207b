import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, EarlierStoreLayoutError } from "../infra/jetstreamLayout.ts";
import { connectNats } from "../services/shared/nats.ts";
import { startTestNats } from "./helpers/testNats.ts";

describe("a NATS store made by an earlier reelay", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  beforeAll(async () => {
    server = await startTestNats();
  });
  afterAll(async () => server?.stop());

  it("is refused at start with what to do, and left as it was (no migration: reelay is pre-1.0)", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: "TASKS", subjects: ["tasks.>"] });
      const start = connectNats(server.url, "earlier-store-test", { replicas: 1, leaseMs: 5_000 });
      await expect(start).rejects.toBeInstanceOf(EarlierStoreLayoutError);
      await expect(start).rejects.toThrow(/made by an earlier reelay \(it has stream TASKS\).*new data directory/);
      expect((await jsm.streams.names().next()).sort()).toEqual(["TASKS"]);
    } finally {
      await nc.close();
    }
  });

  it("of the first one-write layout (the ledger's read models on consumers of their own) is refused too", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete("TASKS");
      await jsm.streams.add({ name: "EVENTS", subjects: ["acct.>"] });
      await jsm.consumers.add("EVENTS", { durable_name: "projector_balances", filter_subject: "acct.*.money.>" });
      const start = connectNats(server.url, "earlier-store-test", { replicas: 1, leaseMs: 5_000 });
      await expect(start).rejects.toThrow(/made by an earlier reelay \(it has consumer EVENTS\/projector_balances\)/);
    } finally {
      await nc.close();
    }
  });

  it("whose reactors read every later task event on acct.A.task.N (before the acceptance had a subject of its own) is refused too", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.consumers.delete("EVENTS", "projector_balances");
      await jsm.consumers.add("EVENTS", { durable_name: "task_log_reactors", filter_subjects: ["acct.*.money.>", "acct.*.task.*"] });
      const start = connectNats(server.url, "earlier-store-test", { replicas: 1, leaseMs: 5_000 });
      await expect(start).rejects.toThrow(/made by an earlier reelay \(it has consumer EVENTS\/task_log_reactors reading acct\.\*\.task\.\*\)/);
    } finally {
      await nc.close();
    }
  });

  it("whose runners read openings on acct.A.money.task.N (before an account's money had epochs) is refused too", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.consumers.delete("EVENTS", "task_log_reactors");
      await jsm.consumers.add("EVENTS", { durable_name: CONSUMERS.runners, filter_subject: "acct.*.money.task.*" });
      const start = connectNats(server.url, "earlier-store-test", { replicas: 1, leaseMs: 5_000 });
      await expect(start).rejects.toThrow(/made by an earlier reelay \(it has consumer EVENTS\/\w+ reading acct\.\*\.money\.task\.\*\)/);
    } finally {
      await nc.close();
    }
  });
});
