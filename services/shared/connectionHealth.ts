import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "./log.ts";
import { natsConnected } from "./metrics/metrics.ts";

/**
 * Whether the NATS connection is up right now. The client reconnects forever, so "not closed" is not
 * "healthy": between a disconnect and the reconnect every request would wait or fail, and a load
 * balancer should send traffic elsewhere.
 */
export function watchConnection(nc: NatsConnection, log: Logger): { connected(): boolean } {
  let connected = true;
  const set = (up: boolean) => {
    connected = up;
    natsConnected.set(up ? 1 : 0);
  };
  set(true);
  (async () => {
    for await (const status of nc.status()) {
      if (status.type === "disconnect") {
        set(false);
        log.warn({ server: status.server }, "lost the NATS connection; reconnecting");
      } else if (status.type === "reconnect") {
        set(true);
        log.info({ server: status.server }, "NATS connection restored");
      } else if (status.type === "close") {
        set(false);
      }
    }
  })().catch(() => set(false));
  return { connected: () => connected && !nc.isClosed() };
}
