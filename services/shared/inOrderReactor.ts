import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "./log.ts";
import type { Nats } from "./nats.ts";
import { pullLoop } from "./pullLoop.ts";

/**
 * A reactor on one durable consumer that handles its messages one at a time, in stream order (each handler
 * acks or naks its message): what keeps counters and indexes from ever going back. `stop` waits for the
 * message in hand.
 */
export async function startInOrderReactor(
  nats: Nats,
  options: { stream: string; durable: string; what: string; log: Logger; handle: (msg: JsMsg) => Promise<void> },
): Promise<{ stop(): Promise<void> }> {
  const stopping = new AbortController();
  let chain: Promise<void> = Promise.resolve();
  const consumer = await nats.js.consumers.get(options.stream, options.durable);
  const loop = pullLoop(consumer, {
    signal: stopping.signal,
    room: () => 100,
    take: (msg) => {
      chain = chain.then(() => options.handle(msg));
    },
    log: options.log,
    what: options.what,
  });
  return {
    stop: async () => {
      stopping.abort();
      await loop;
      await chain;
    },
  };
}
