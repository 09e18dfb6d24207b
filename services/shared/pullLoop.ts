import { setTimeout as sleep } from "node:timers/promises";
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import { FEED_HEARTBEAT_MS } from "./liveFeed.ts";
import type { Logger } from "./log.ts";

/**
 * The fetch loop every durable-consumer worker runs: pull a batch, hand each message over, retry after
 * errors (a NATS reconnect, a deleted consumer being recreated) until `signal` aborts. Each fetch asks for the
 * live feeds' heartbeat (see liveFeed.ts): a consumer lost under it (its node gone) ends the fetch with an
 * error after 1-1.5 s of silence, and the next fetch, half a second later, finds it wherever it leads now. `room` bounds a
 * batch by what the caller can still take (0: wait a moment and ask again).
 *
 * An abort ends the pull in progress at once instead of waiting for it to expire (a second per worker:
 * stopping a projector's three workers took three seconds). A message the server sent that was not handed
 * over yet is not acknowledged, so it is delivered again after the ack wait, as after a crash.
 */
export async function pullLoop(
  consumer: Consumer,
  options: {
    signal: AbortSignal;
    room: () => number;
    take: (msg: JsMsg) => void;
    log: Logger;
    what: string;
  },
): Promise<void> {
  const { signal } = options;
  while (!signal.aborted) {
    const room = options.room();
    if (room <= 0) {
      await pause(50, signal);
      continue;
    }
    try {
      const batch = await consumer.fetch({ max_messages: room, expires: 1000, idle_heartbeat: FEED_HEARTBEAT_MS });
      const stopBatch = () => void batch.stop();
      signal.addEventListener("abort", stopBatch, { once: true });
      try {
        for await (const msg of batch) {
          if (signal.aborted) break;
          options.take(msg);
        }
      } finally {
        signal.removeEventListener("abort", stopBatch);
      }
    } catch (error) {
      if (!signal.aborted) options.log.warn({ err: error }, `${options.what}: fetch failed; retrying`);
      await pause(500, signal);
    }
  }
}

const pause = (ms: number, signal: AbortSignal): Promise<void> => sleep(ms, undefined, { signal }).catch(() => undefined);
