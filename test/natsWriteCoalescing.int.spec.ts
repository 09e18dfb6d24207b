import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { coalesceWrites } from "../services/shared/natsWriteCoalescing.ts";
import { startTestNats } from "./helpers/testNats.ts";

/** Counts the client's socket writes (the transport's `send`), so the test sees what coalescing saves. */
function countWrites(nc: NatsConnection): () => number {
  const transport = (nc as unknown as { protocol: { transport: { send(frame: Uint8Array): void } } }).protocol.transport;
  let writes = 0;
  const send = transport.send.bind(transport);
  transport.send = (frame) => {
    writes++;
    send(frame);
  };
  return () => writes;
}

/** Ten publishes, each after an await: the shape of reelay's steps (publish, await, publish again). */
async function publishAcrossMicrotasks(nc: NatsConnection, subject: string): Promise<void> {
  for (let i = 0; i < 10; i++) {
    nc.publish(subject, String(i));
    await Promise.resolve();
  }
}

describe("NATS write coalescing", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  beforeAll(async () => {
    server = await startTestNats();
  });
  afterAll(async () => server?.stop());

  it("applies to the pinned client (an upgrade that changes its internals fails here)", async () => {
    const nc = await connect({ servers: server.url });
    expect(coalesceWrites(nc)).toBe(true);
    await nc.close();
  });

  it("joins the commands of one event-loop turn into one socket write, in order, none lost", async () => {
    const plain = await connect({ servers: server.url });
    const coalesced = await connect({ servers: server.url });
    coalesceWrites(coalesced);
    const received: string[] = [];
    const subscription = plain.subscribe("coalesce.test", { callback: (_error, msg) => void received.push(msg.string()) });
    await plain.flush();

    const plainWrites = countWrites(plain);
    await publishAcrossMicrotasks(plain, "coalesce.other");
    await plain.flush();
    const coalescedWrites = countWrites(coalesced);
    await publishAcrossMicrotasks(coalesced, "coalesce.test");
    await coalesced.flush();

    expect(plainWrites()).toBeGreaterThanOrEqual(10);
    // The ten publishes in one write, the flush's PING in another.
    expect(coalescedWrites()).toBeLessThanOrEqual(2);
    await expect.poll(() => received).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]);
    subscription.unsubscribe();
    await Promise.all([plain.close(), coalesced.close()]);
  });

  it("still sends a request's reply in time and a full buffer at once", async () => {
    const nc = await connect({ servers: server.url });
    coalesceWrites(nc);
    nc.subscribe("coalesce.echo", { callback: (_error, msg) => void msg.respond(msg.data) });
    const reply = await nc.request("coalesce.echo", "ping", { timeout: 2000 });
    expect(reply.string()).toBe("ping");
    // Larger than the client's pending limit (32 KiB by default) in one synchronous run: flushed inline.
    const big = new Uint8Array(256 * 1024);
    const replies = await Promise.all(Array.from({ length: 4 }, () => nc.request("coalesce.echo", big, { timeout: 5000 })));
    expect(replies.map((r) => r.data.length)).toEqual([big.length, big.length, big.length, big.length]);
    await nc.close();
  });
});
