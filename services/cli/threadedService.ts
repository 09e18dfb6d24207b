import { Worker } from "node:worker_threads";
import type { ServiceThreadData } from "./serviceThread.ts";

/** Stopping normally takes a second or two; this bounds it when NATS is gone (work left unacked is redelivered). */
const STOP_GRACE_MS = 8_000;
const ENTRY = new URL("../../scripts/service-thread.mjs", import.meta.url);

/**
 * Runs the runner or the projector on a thread of its own, so one `reelay serve` process uses more than
 * one core (Node runs JavaScript on one thread; the edge keeps the main one). Resolves once it is ready.
 */
export async function startServiceThread(data: ServiceThreadData): Promise<{ stop(): Promise<void> }> {
  const worker = new Worker(ENTRY, { workerData: data });
  await new Promise<void>((resolve, reject) => {
    worker.once("message", (message: unknown) => (message === "ready" ? resolve() : reject(new Error(String(message)))));
    worker.once("error", reject);
    worker.once("exit", (code) => reject(new Error(`${data.service} thread exited with code ${code} before it was ready`)));
  });
  worker.removeAllListeners();
  // A service thread that dies takes the process with it: a supervisor then restarts everything, rather
  // than leaving an edge that accepts work no runner will do. (Jobs and events wait in JetStream.)
  worker.on("error", (error) => {
    process.stderr.write(`reelay: the ${data.service} thread failed: ${error.stack ?? String(error)}\n`);
    process.exit(1);
  });
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        worker.removeAllListeners("error");
        // A thread that cannot finish stopping (NATS gone mid-shutdown) is ended after a grace period.
        const deadline = setTimeout(() => void worker.terminate(), STOP_GRACE_MS);
        worker.once("exit", () => {
          clearTimeout(deadline);
          resolve();
        });
        worker.on("message", (message: unknown) => {
          if (message === "stopped") void worker.terminate();
        });
        worker.postMessage("stop");
      }),
  };
}
