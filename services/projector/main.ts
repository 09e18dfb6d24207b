import type { ReelayConfig } from "../../contracts/config.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { environment } from "../shared/environment.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { WebhookDispatcher } from "../webhooks/webhookDispatcher.ts";
import { startEventReactors } from "./eventReactors.ts";

/**
 * How long a task's settlement waits, on an account with no write under way, for others of the account to be
 * written with it. Every money message of an account fences the next: a create decided on the account as its
 * edge last read it loses its guarded write to each settlement written meanwhile, then reads and tries again.
 * With the instant suite's 20 busy accounts, a settlement alone per write made a quarter of creates and a third
 * of settlements lose a race; grouped for 100 ms, the suite's tasks cost 10% fewer messages and ran 15–35%
 * faster (docs/benchmarks.md). Charges land up to 100 ms later; no reactor waits for them.
 */
const SETTLEMENT_LINGER_MS = 100;

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
  const reactors = await startEventReactors(nats, new AccountLedger(nats, { closeLingerMs: SETTLEMENT_LINGER_MS }), log.child({ part: "event reactors" }));
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
