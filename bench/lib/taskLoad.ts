import { DeliverPolicy, jetstream } from "@nats-io/jetstream";
import { Pool } from "undici";
import type { NatsConnection } from "@nats-io/transport-node";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { TASK_STATE_EVENTS } from "../../contracts/videoTask.ts";

/** Counts of tasks that reached success or failed from now on, read with the bench's own ordered consumer. */
export interface FinalsWatch {
  succeeded: number;
  failed: number;
  /** performance.now() of the latest final event. */
  lastFinal: number;
  stop(): void;
}

/**
 * Watches the `state` events of every task (`acct.<account>.task.<id>.state`, where finals are; openings and
 * acceptances are not delivered) and reads only each event's type: the watch shares the 2 cores with what it
 * measures. `log`: another stream and its state subjects (the instant floor's, bench/createFloor.ts).
 */
export async function watchFinals(nc: NatsConnection, log: { stream: string; subjects: string } = { stream: STREAMS.events.name, subjects: TASK_STATE_EVENTS }): Promise<FinalsWatch> {
  const consumer = await jetstream(nc).consumers.get(log.stream, { filter_subjects: log.subjects, deliver_policy: DeliverPolicy.New });
  const feed = await consumer.consume();
  const watch: FinalsWatch = { succeeded: 0, failed: 0, lastFinal: 0, stop: () => feed.stop() };
  void (async () => {
    for await (const msg of feed) {
      const raw: unknown = msg.json();
      for (const event of Array.isArray(raw) ? raw : [raw]) {
        const type = (event as { type?: unknown } | null)?.type;
        if (type === "GenerationSucceeded") watch.succeeded++;
        else if (type === "GenerationFailed") watch.failed++;
        else continue;
        watch.lastFinal = performance.now();
      }
    }
  })();
  return watch;
}

/**
 * A create that throws unless reelay answers 200. Through an undici pool, not fetch: the load generator
 * shares the 2 cores with what it measures, and fetch cost it about twice the CPU per request.
 */
export function videoCreator(baseUrl: string, keys: readonly string[], request: Record<string, unknown>): () => Promise<void> {
  const body = JSON.stringify(request);
  const pool = new Pool(baseUrl, { connections: 128 });
  // The keys in turn: a gateway's creates come from many tenants.
  const headers = keys.map((key) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" }));
  let turn = 0;
  return async () => {
    const response = await pool.request({ path: "/api/compat/videosGenerations", method: "POST", headers: headers[turn++ % headers.length], body });
    await response.body.dump();
    if (response.statusCode !== 200) throw new Error(`create answered ${response.statusCode}`);
  };
}

/** `count` calls of `create`, `inFlight` at a time. */
export async function createConcurrently(count: number, inFlight: number, create: () => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        next++;
        await create();
      }
    }),
  );
}
