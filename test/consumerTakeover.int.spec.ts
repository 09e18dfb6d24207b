import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, ensureJetStreamLayout, STREAMS } from "../infra/jetstreamLayout.ts";
import { startTestNats } from "./helpers/testNats.ts";

/**
 * One consumer now keeps the task views, index and counters, where an older reelay had three. Made on such
 * a store, it starts after the last event all three had acknowledged: nothing is skipped, and a big task
 * log is not read again from its beginning.
 */
describe("the task read models' consumer on a store an older reelay used", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  beforeAll(async () => {
    server = await startTestNats();
  });
  afterAll(async () => server?.stop());

  it("starts after the lowest acknowledgement of the consumers it replaces", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const js = jetstream(nc);
      await jsm.streams.add({ name: STREAMS.tasks.name, subjects: ["tasks.>"], allow_direct: true });
      for (let i = 1; i <= 30; i++) await js.publish(`tasks.${i}`, "{}");
      // The older consumers, each acknowledged up to a different point (ack policy all: one ack covers the rest).
      for (const [durable, upTo] of [["projector_task_views", 20], ["projector_task_index", 12], ["projector_task_stats", 25]] as const) {
        await jsm.consumers.add(STREAMS.tasks.name, { durable_name: durable, ack_policy: AckPolicy.All });
        const consumer = await js.consumers.get(STREAMS.tasks.name, durable);
        for await (const msg of await consumer.fetch({ max_messages: upTo, expires: 2_000 })) if (msg.seq === upTo) await msg.ackAck();
      }

      await ensureJetStreamLayout(nc, jsm, { replicas: 1, leaseMs: 5_000 });

      const made = await jsm.consumers.info(STREAMS.tasks.name, CONSUMERS.taskReadModels);
      expect(made.config.opt_start_seq).toBe(13);
      expect(made.num_pending).toBe(18);
    } finally {
      await nc.close();
    }
  });

  it("reads the task log from its beginning on a store without them", async () => {
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(STREAMS.tasks.name);
      await ensureJetStreamLayout(nc, jsm, { replicas: 1, leaseMs: 5_000 });
      const made = await jsm.consumers.info(STREAMS.tasks.name, CONSUMERS.taskReadModels);
      expect(made.config.opt_start_seq ?? 0).toBe(0);
      expect(made.config.deliver_policy).toBe("all");
    } finally {
      await nc.close();
    }
  });
});
