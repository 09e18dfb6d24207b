import { AckPolicy, jetstream, jetstreamManager, type Consumer, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeldJob } from "../services/runner/heldJob.ts";
import { startTestNats } from "./helpers/testNats.ts";

/** A held job answers JetStream exactly as the client's JsMsg would, on a real server. */
describe("HeldJob", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const ACK_WAIT_MS = 1_200;

  beforeAll(async () => {
    server = await startTestNats();
    nc = await connect({ servers: server.url });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "HELD", subjects: ["held.>"] });
  });
  afterAll(async () => {
    await nc?.drain();
    await server?.stop();
  });

  /** A fresh consumer with one message waiting on its own subject. */
  async function oneJob(name: string): Promise<{ consumer: Consumer; msg: JsMsg }> {
    await jsm.consumers.add("HELD", { durable_name: name, filter_subject: `held.${name}`, ack_policy: AckPolicy.Explicit, ack_wait: ACK_WAIT_MS * 1_000_000 });
    const js = jetstream(nc);
    await js.publish(`held.${name}`, "job");
    const consumer = await js.consumers.get("HELD", name);
    const msg = await consumer.next({ expires: 2_000 });
    if (!msg) throw new Error("no message delivered");
    return { consumer, msg };
  }
  const pending = async (name: string) => (await jsm.consumers.info("HELD", name)).num_ack_pending;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it("keeps the job while it heartbeats past the ack wait, and ack ends it", async () => {
    const { consumer, msg } = await oneJob("beats");
    const job = HeldJob.of(nc, msg);
    for (let i = 0; i < 4; i++) {
      await sleep(ACK_WAIT_MS / 3);
      job.working();
    }
    await nc.flush();
    // Over the ack wait has passed: without the heartbeats it would be delivered again here.
    expect(await consumer.next({ expires: 1_000 })).toBeNull();
    job.ack();
    job.nak();
    await nc.flush();
    expect(await pending("beats")).toBe(0);
    expect(await consumer.next({ expires: 1_500 })).toBeNull();
  });

  it("nak with a delay hands the job back after the delay, to the next delivery", async () => {
    const { consumer, msg } = await oneJob("later");
    const job = HeldJob.of(nc, msg);
    const handedBackAt = Date.now();
    job.nak(300);
    // A final answer is final: a heartbeat after it must not keep the job.
    job.working();
    const again = await consumer.next({ expires: 3_000 });
    expect(again?.info.deliveryCount).toBe(2);
    expect(Date.now() - handedBackAt).toBeGreaterThanOrEqual(290);
    again?.ack();
  });

  it("refuses a message that is not a JetStream delivery", () => {
    const plain = { reply: "_INBOX.abc" } as unknown as JsMsg;
    expect(() => HeldJob.of(nc, plain)).toThrow(/without an ack subject: _INBOX.abc/);
  });
});
