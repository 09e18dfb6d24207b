import { parentPort, workerData } from "node:worker_threads";
import type { ReelayConfig } from "../../contracts/config.ts";
import { createLogger } from "../shared/log.ts";
import { connectNats } from "../shared/nats.ts";
import { drainWithin } from "./natsContext.ts";
import { startProjector } from "../projector/main.ts";
import { startRunner } from "../runner/main.ts";

/**
 * Body of one service thread of `reelay serve` (see threadedService.ts): its own NATS connection, its
 * own logger, started on load, stopped when the main thread says "stop".
 */
export interface ServiceThreadData {
  service: "runner" | "projector";
  natsUrl: string;
  config: ReelayConfig;
}

const { service, natsUrl, config } = workerData as ServiceThreadData;
const port = parentPort;
if (!port) throw new Error("serviceThread.ts runs only as a worker thread");

const log = createLogger(service);
const nats = await connectNats(natsUrl, `reelay-${service}`);
const running = service === "runner" ? await startRunner(nats, config, log) : await startProjector(nats, log);
port.postMessage("ready");
port.on("message", (message: unknown) => {
  if (message !== "stop") return;
  void (async () => {
    await running.stop().catch((error: unknown) => log.error({ err: error }, "error while stopping"));
    await drainWithin(nats.nc, 5000);
    port.postMessage("stopped");
    port.close();
  })();
});
