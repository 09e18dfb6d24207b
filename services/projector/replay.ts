import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { Projection } from "../shared/projection.ts";

/**
 * Rebuilds a read model from nothing by folding its whole stream in order (ordered consumer), without
 * touching the live bucket: the audit compares the result with what the projector serves.
 */
export async function replayProjection<Event, Doc>(
  js: JetStreamClient,
  jsm: JetStreamManager,
  projection: Projection<Event, Doc>,
): Promise<{ docs: Map<string, Doc>; events: number }> {
  const docs = new Map<string, Doc>();
  const { state } = await jsm.streams.info(projection.stream);
  if (state.messages === 0) return { docs, events: 0 };
  const consumer = await js.consumers.get(projection.stream, { deliver_policy: DeliverPolicy.All });
  let events = 0;
  for await (const msg of await consumer.consume({ max_messages: 2048 })) {
    events += 1;
    const event = projection.decode(msg.json());
    const key = projection.keyOf(event);
    if (key !== undefined) {
      const doc = projection.evolve(docs.get(key) ?? null, event, msg.seq);
      if (doc === null) docs.delete(key);
      else docs.set(key, doc);
    }
    if (msg.seq >= state.last_seq) break;
  }
  await consumer.delete().catch(() => undefined);
  return { docs, events };
}
