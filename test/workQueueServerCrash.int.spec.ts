import { jetstream, jetstreamManager, type JsMsg } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { taskOpeningSubject } from "../contracts/videoTask.ts";
import { CONSUMERS, ensureJetStreamLayout, STREAMS } from "../infra/jetstreamLayout.ts";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";

const LEASE_MS = 1_500;
const JOBS = 40;

/**
 * nats-server 2.9 stranded a work-queue message after a SIGKILL: it stayed in the stream and was never
 * delivered again. Tasks held (their first events unacked) by a runner when the server dies must come
 * back after a restart.
 */
describe("a nats-server killed with SIGKILL while runners hold jobs", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-wq-crash-"));
  let server: RunningNatsServer | undefined;
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("delivers every held job again after a restart on its store, and strands none", async () => {
    const store = join(dir, "store");
    server = await startNatsServer({ storeDir: store, say: () => {} });
    const port = Number(new URL(server.url).port);
    const nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    try {
      const jsm = await jetstreamManager(nc);
      await ensureJetStreamLayout(nc, jsm, { replicas: 1, leaseMs: LEASE_MS });
      const js = jetstream(nc);
      for (let id = 1; id <= JOBS; id++) await js.publish(taskOpeningSubject("acme", id, 0), JSON.stringify({ taskId: id }));

      const runners = await js.consumers.get(STREAMS.events.name, CONSUMERS.runners);
      const held: JsMsg[] = [];
      for await (const msg of await runners.fetch({ max_messages: JOBS, expires: 5_000 })) held.push(msg);
      expect(held).toHaveLength(JOBS);
      // Half are finished (acked and confirmed by the server); the other half are still being worked on.
      const finished = held.filter((msg) => msg.seq % 2 === 0);
      for (const msg of finished) expect(await msg.ackAck()).toBe(true);

      await server.kill("SIGKILL");
      server = await startNatsServer({ storeDir: store, say: () => {}, port });

      // Every unfinished one comes back. A finished one may too (the consumer's last acks can die with the
      // server): its runner reads the task's log, finds it final and acks it again. Such a one comes back when
      // its lease runs out, which may be after the last unfinished one: the runner takes and acks what comes
      // until the consumer holds nothing (stopping at the last unfinished one left it pending, once in CI).
      const again = new Set<number>();
      const takeAndAck = async (): Promise<{ num_pending: number; num_ack_pending: number }> => {
        const batch = await runners.fetch({ max_messages: JOBS, expires: 1_000 }).catch(() => undefined);
        for await (const msg of batch ?? []) {
          again.add(Number(msg.subject.split(".").at(-1)));
          await msg.ackAck();
        }
        const { num_pending, num_ack_pending } = await jsm.consumers.info(STREAMS.events.name, CONSUMERS.runners);
        return { num_pending, num_ack_pending };
      };
      const unfinished = held.filter((msg) => msg.seq % 2 === 1).map((msg) => Number(msg.subject.split(".").at(-1)));
      await expect
        .poll(
          async () => {
            const consumer = await takeAndAck();
            return unfinished.every((id) => again.has(id)) ? consumer : `${unfinished.filter((id) => !again.has(id)).length} unfinished not back yet`;
          },
          { timeout: 20_000, interval: 0 },
        )
        .toEqual({ num_pending: 0, num_ack_pending: 0 });
      expect([...again]).toEqual(expect.arrayContaining(unfinished));
    } finally {
      await nc.close();
    }
  });
});
