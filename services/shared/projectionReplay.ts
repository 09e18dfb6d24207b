import { DeliverPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import type { Projection } from "./projection.ts";

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
  const events = await readWholeStream(js, jsm, projection.stream, projection.subjects, (msg) => {
    for (const event of projection.decode(msg.json())) {
      const key = projection.keyOf(event);
      if (key === undefined) continue;
      const doc = projection.evolve(docs.get(key) ?? null, event, msg.seq);
      if (doc === null) docs.delete(key);
      else docs.set(key, doc);
    }
  });
  // What the live runner writes: documents the projection does not store yet are not in its bucket either.
  for (const [key, doc] of docs) if (projection.persists?.(doc) === false) docs.delete(key);
  return { docs, events };
}

/**
 * Hands every message of a stream on `subjects`, as it stands now, to `take` in order (ordered consumer);
 * resolves to the count.
 */
export async function readWholeStream(
  js: JetStreamClient,
  jsm: JetStreamManager,
  stream: string,
  subjects: readonly string[],
  take: (msg: JsMsg) => void,
): Promise<number> {
  const { state } = await jsm.streams.info(stream);
  if (state.messages === 0) return 0;
  const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.All, filter_subjects: [...subjects] });
  // None on these subjects: consume() would wait for one.
  if ((await consumer.info()).num_pending === 0) return 0;
  let count = 0;
  for await (const msg of await consumer.consume({ max_messages: 2048 })) {
    count += 1;
    take(msg);
    if (msg.seq >= state.last_seq || msg.info.pending === 0) break;
  }
  await consumer.delete().catch(() => undefined);
  return count;
}
