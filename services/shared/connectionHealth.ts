import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "./log.ts";

/**
 * Whether the NATS connection is up right now. The client reconnects forever, so "not closed" is not
 * "healthy": between a disconnect and the reconnect every request would wait or fail, and a load
 * balancer should send traffic elsewhere.
 */
export function watchConnection(nc: NatsConnection, log: Logger): { connected(): boolean } {
  let connected = true;
  (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect") {
        connected = false;
        log.warn({ server: status.server }, "lost the NATS connection; reconnecting");
      } else if (status.type === "reconnect") {
        connected = true;
        log.info({ server: status.server }, "NATS connection restored");
      } else if (status.type === "close") {
        connected = false;
      }
    }
  })().catch(() => (connected = false));
  return { connected: () => connected && !nc.isClosed() };
}
