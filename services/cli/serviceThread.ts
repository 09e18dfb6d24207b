import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import type { ReelayConfig } from "../../contracts/config.ts";
import { createLogger } from "../shared/log.ts";
import { registry } from "../shared/metrics/metrics.ts";
import { startThreadMetrics } from "../shared/metrics/threadMetrics.ts";
import { startTracing, stopTracing } from "../shared/tracing/tracing.ts";
import { asServiceUnavailable } from "../shared/infrastructureErrors.ts";
import { connectNats, type Nats } from "../shared/nats.ts";
import type { NatsCredentials } from "../../infra/natsCredentials.ts";
import { drainWithin } from "./natsContext.ts";
import { isOperatorError } from "./operatorErrors.ts";

/**
 * Body of one service thread of `reelay serve` (see threadedService.ts): its own NATS connection, its
 * own logger, started on load, stopped when the main thread says "stop".
 */
export interface ServiceThreadData {
  service: "runner" | "projector";
  natsUrl: string;
  /** The embedded server's (threads share the process's memory, never a command line). */
  natsCredentials?: NatsCredentials;
  config: ReelayConfig;
  /** A projector's way to the edge's ledger in the main thread (services/billing/reservationCloser.ts), when the process has an edge. */
  closes?: MessagePort;
}

/** The main thread asks for this thread's metrics with `{ type: "metrics", id }`. */
export interface MetricsRequest {
  type: "metrics";
  id: number;
}
const isMetricsRequest = (message: unknown): message is MetricsRequest =>
  typeof message === "object" && message !== null && (message as { type?: unknown }).type === "metrics";

const { service, natsUrl, natsCredentials, config, closes } = workerData as ServiceThreadData;
const port = parentPort;
if (!port) throw new Error("serviceThread.ts runs only as a worker thread");

/**
 * The thread could not start; `passing`: NATS trouble that may be gone in a moment (the main thread starts a new
 * thread then); `forOperator`: a setting or program to fix, whose `message` alone says what (else it is the stack).
 */
export interface StartFailed {
  type: "startFailed";
  passing: boolean;
  forOperator: boolean;
  message: string;
}

const log = createLogger(service);
startThreadMetrics(service, { processDefaults: false });
await startTracing(service);
const { nats, running } = await startService().catch((error: unknown) => {
  const passing = asServiceUnavailable(error) !== undefined;
  // Passing trouble is retried, never reported as the operator's to fix (a ServiceUnavailableError is a ReelayError too).
  const forOperator = !passing && isOperatorError(error);
  const message = forOperator ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);
  const failed: StartFailed = { type: "startFailed", passing, forOperator, message };
  port.postMessage(failed);
  // Ends this thread only, with whatever it had started (its NATS connection among it): a new thread starts clean.
  process.exit(1);
});
port.postMessage("ready");
async function startService() {
  const nats = await connectNats(natsUrl, `reelay-${service}`, undefined, natsCredentials);
  // Only this thread's service is loaded: a runner thread never loads the projector's modules, nor the reverse.
  const running =
    service === "runner" ? await (await import("../runner/main.ts")).startRunner(nats, config, log) : await startProjectorThread(nats);
  return { nats, running };
}

async function startProjectorThread(nats: Nats) {
  const closer = closes ? new (await import("../billing/reservationCloser.ts")).BridgedCloser(closes) : undefined;
  return (await import("../projector/main.ts")).startProjector(nats, config, log, closer);
}

port.on("message", (message: unknown) => {
  if (isMetricsRequest(message)) {
    // The main thread merges every thread's registry into one scrape (services/shared/metrics).
    registry.getMetricsAsJSON().then(
      (metrics) => port.postMessage({ type: "metrics", id: message.id, metrics }),
      (error: unknown) => {
        log.error({ err: error }, "collecting this thread's metrics failed");
        port.postMessage({ type: "metrics", id: message.id, metrics: [] });
      },
    );
    return;
  }
  if (message !== "stop") return;
  void (async () => {
    await running.stop().catch((error: unknown) => log.error({ err: error }, "error while stopping"));
    await drainWithin(nats.nc, 5000);
    await stopTracing();
    port.postMessage("stopped");
    port.close();
  })();
});
