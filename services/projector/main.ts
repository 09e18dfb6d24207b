import type { ReelayConfig } from "../../contracts/config.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { environment } from "../shared/environment.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { WebhookDispatcher } from "../webhooks/webhookDispatcher.ts";
import { startEventReactors } from "./eventReactors.ts";

/**
 * Starts the projector, until `stop`: the reactors on the event log (the task views, index and counters,
 * settlement, webhook jobs, the ledger's read models), and the webhook dispatcher.
 */
export async function startProjector(nats: Nats, config: ReelayConfig, log: Logger): Promise<{ stop(): Promise<void> }> {
  const webhooks = new WebhookDispatcher(
    nats,
    { config: config.webhooks, videoBaseUrl: videoBaseUrl(), leaseMs: config.runner.leaseMs },
    log.child({ part: "webhooks" }),
  );
  await webhooks.start();
  const reactors = await startEventReactors(nats, new AccountLedger(nats), log.child({ part: "event reactors" }));
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
