import { setTimeout as sleep } from "node:timers/promises";
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "./log.ts";

/**
 * The fetch loop every durable-consumer worker runs: pull a batch, hand each message over, retry after
 * errors (a NATS reconnect, a deleted consumer being recreated) until `stopped` says so. `room` bounds a
 * batch by what the caller can still take (0: wait a moment and ask again).
 */
export async function pullLoop(
  consumer: Consumer,
  options: { stopped: () => boolean; room: () => number; take: (msg: JsMsg) => void; log: Logger; what: string },
): Promise<void> {
  while (!options.stopped()) {
    const room = options.room();
    if (room <= 0) {
      await sleep(50);
      continue;
    }
    try {
      const batch = await consumer.fetch({ max_messages: room, expires: 1000 });
      for await (const msg of batch) options.take(msg);
    } catch (error) {
      if (!options.stopped()) options.log.warn({ err: error }, `${options.what}: fetch failed; retrying`);
      await sleep(500);
    }
  }
}

