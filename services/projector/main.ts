import type { ReelayConfig } from "../../contracts/config.ts";
import { environment } from "../shared/environment.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { WebhookDispatcher } from "../webhooks/webhookDispatcher.ts";
import { ProjectorService } from "./projectorService.ts";
import { startTaskReadModels } from "./taskReadModels.ts";

/**
 * Starts the projector: folds the event streams into the read models (the ledger's, and the task log's
 * views, index and counters), and delivers task status changes to callback URLs (reactors on the same task log), until `stop`.
 */
export async function startProjector(nats: Nats, config: ReelayConfig, log: Logger): Promise<{ stop(): Promise<void> }> {
  const projector = new ProjectorService(nats, log);
  const webhooks = new WebhookDispatcher(
    nats,
    { config: config.webhooks, videoBaseUrl: videoBaseUrl(), leaseMs: config.runner.leaseMs },
    log.child({ part: "webhooks" }),
  );
  await projector.start();
  await webhooks.start();
  const taskReadModels = await startTaskReadModels(nats, log.child({ part: "task read models" }));
  return {
    stop: async () => {
      await taskReadModels.stop();
      await webhooks.stop();
      await projector.stop();
    },
  };
}

/** Where video addresses in webhook bodies point: REELAY_PUBLIC_URL, or the edge on this machine. */
function videoBaseUrl(): string {
  const { REELAY_PUBLIC_URL, PORT } = environment();
  return REELAY_PUBLIC_URL?.replace(/\/+$/, "") ?? `http://localhost:${PORT}`;
}
