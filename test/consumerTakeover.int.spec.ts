import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, ensureJetStreamLayout, STREAMS } from "../infra/jetstreamLayout.ts";
import { startTestNats } from "./helpers/testNats.ts";

/**
 * One consumer now feeds every reactor on the task log (views, index, counters, settlement, webhook jobs),
 * where older reelays had one each, then three. Made on such a store, it starts after the last event all of
 * them had acknowledged: nothing is skipped, and a big task log is not read again from its beginning.
 */
describe("the task-log reactors' consumer on a store an older reelay used", () => {
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
      // The older consumers, each acknowledged up to a different point (ack policy all: one ack covers the
      // rest; the webhooks' explicit acks one by one).
      for (const [durable, upTo, policy] of [
        ["projector_task_read_models", 20, AckPolicy.All],
        ["settlement", 25, AckPolicy.All],
        ["webhooks", 12, AckPolicy.Explicit],
      ] as const) {
        await jsm.consumers.add(STREAMS.tasks.name, { durable_name: durable, ack_policy: policy });
        const consumer = await js.consumers.get(STREAMS.tasks.name, durable);
        for await (const msg of await consumer.fetch({ max_messages: upTo, expires: 2_000 })) {
          if (policy === AckPolicy.Explicit) await msg.ackAck();
          else if (msg.seq === upTo) await msg.ackAck();
        }
      }

      await ensureJetStreamLayout(nc, jsm, { replicas: 1, leaseMs: 5_000 });

      const made = await jsm.consumers.info(STREAMS.tasks.name, CONSUMERS.taskLogReactors);
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
      const made = await jsm.consumers.info(STREAMS.tasks.name, CONSUMERS.taskLogReactors);
      expect(made.config.opt_start_seq ?? 0).toBe(0);
      expect(made.config.deliver_policy).toBe("all");
    } finally {
      await nc.close();
    }
  });
});
