import type { ReelayConfig } from "../../contracts/config.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import type { ReservationCloser } from "../billing/reservationCloser.ts";
import { EdgeService, type EdgeOptions } from "./edgeService.ts";

/** Starts the HTTP edge; `port` is the bound port. */
export async function startEdge(
  nats: Nats,
  config: ReelayConfig,
  log: Logger,
  options: EdgeOptions,
): Promise<{ port: number; adminPort: number | undefined; reservationCloser: ReservationCloser; stop(): Promise<void> }> {
  const edge = new EdgeService(nats, config, log, options);
  // A start that fails (a port in use) lets go of what it had started: its watches, its listener.
  const port = await edge.start().catch(async (error: unknown) => {
    await edge.stop().catch(() => undefined);
    throw error;
  });
  return { port, adminPort: edge.adminPort, reservationCloser: edge.reservationCloser, stop: () => edge.stop() };
}
