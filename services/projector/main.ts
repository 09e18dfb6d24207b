import type { ReelayConfig } from "../../contracts/config.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import type { ReservationCloser } from "../billing/reservationCloser.ts";
import { SETTLEMENT_LINGER_MS } from "../billing/settlement.ts";
import { environment } from "../shared/environment.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { WebhookDispatcher } from "../webhooks/webhookDispatcher.ts";
import { startEventReactors } from "./eventReactors.ts";

/**
 * Starts the projector, until `stop`: the reactors on the event log (the task views, index and counters,
 * settlement, webhook jobs, the ledger's read model), and the webhook dispatcher. Settlement closes reservations
 * with `closer` when given (the edge's ledger in the same process: services/billing/reservationCloser.ts), else
 * with a ledger of its own.
 */
export async function startProjector(nats: Nats, config: ReelayConfig, log: Logger, closer?: ReservationCloser): Promise<{ stop(): Promise<void> }> {
  const webhooks = new WebhookDispatcher(
    nats,
    { config: config.webhooks, videoBaseUrl: videoBaseUrl(), leaseMs: config.runner.leaseMs },
    log.child({ part: "webhooks" }),
  );
  await webhooks.start();
  const ledger = closer ?? new AccountLedger(nats, { closeLingerMs: SETTLEMENT_LINGER_MS });
  const reactors = await startEventReactors(nats, ledger, log.child({ part: "event reactors" }));
  return {
    stop: async () => {
      await reactors.stop();
      await webhooks.stop();
    },
  };
}

/** Where video addresses in webhook bodies point: REELAY_PUBLIC_URL, or the edge on this machine. */
function videoBaseUrl(): string {
  const { REELAY_PUBLIC_URL, PORT } = environment();
  return REELAY_PUBLIC_URL?.replace(/\/+$/, "") ?? `http://localhost:${PORT}`;
}
