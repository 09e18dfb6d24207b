import type { JetStreamManager } from "@nats-io/jetstream";

/** Where a durable consumer stands: what it has not been handed yet, and what it holds unacknowledged. */
export interface ConsumerFloor {
  pending: number;
  ackPending: number;
  /** When the oldest message it still owes was written; undefined when it owes none (caught up). */
  oldestOwedAt: Date | undefined;
}

/**
 * Reads a durable consumer's floor from the server. The message after its ack floor is the oldest it still
 * owes. (On a consumer that reads some subjects only, it may be another subject's message, written no later:
 * its time is then a bound, never later than the truth.)
 */
export async function readConsumerFloor(jsm: JetStreamManager, stream: string, durable: string): Promise<ConsumerFloor> {
  const info = await jsm.consumers.info(stream, durable);
  const { num_pending: pending, num_ack_pending: ackPending } = info;
  if (pending + ackPending === 0) return { pending, ackPending, oldestOwedAt: undefined };
  // The first message from there on: work queues delete what is acked, and a message may have been removed.
  const message = await jsm.direct.getMessage(stream, { seq: info.ack_floor.stream_seq + 1, next_by_subj: ">" }).catch(() => null);
  if (message) return { pending, ackPending, oldestOwedAt: message.time };
  // Nothing from there on (removed since the consumer's info was read): the stream's first stands for it.
  const { state } = await jsm.streams.info(stream);
  return { pending, ackPending, oldestOwedAt: new Date(state.messages > 0 ? Date.parse(state.first_ts) : Date.now()) };
}
