import { Worker } from "node:worker_threads";
import type { MetricsSnapshot } from "../shared/metrics/processMetrics.ts";
import type { ServiceThreadData } from "./serviceThread.ts";

/** A scrape that a busy thread cannot answer within this gets the other threads' metrics only. */
const METRICS_WAIT_MS = 2_000;

/** Stopping normally takes a second or two; this bounds it when NATS is gone (work left unacked is redelivered). */
const STOP_GRACE_MS = 8_000;
const ENTRY = new URL("../../scripts/service-thread.mjs", import.meta.url);

/**
 * Runs the runner or the projector on a thread of its own, so one `reelay serve` process uses more than
 * one core (Node runs JavaScript on one thread; the edge keeps the main one). Resolves once it is ready.
 */
export async function startServiceThread(data: ServiceThreadData): Promise<{ stop(): Promise<void>; metrics(): Promise<MetricsSnapshot> }> {
  const worker = new Worker(ENTRY, { workerData: data });
  let onMessage: ((message: unknown) => void) | undefined;
  let onError: ((error: Error) => void) | undefined;
  let onExit: ((code: number) => void) | undefined;
  await new Promise<void>((resolve, reject) => {
    onMessage = (message) => (message === "ready" ? resolve() : reject(new Error(String(message))));
    onError = reject;
    onExit = (code) => reject(new Error(`${data.service} thread exited with code ${code} before it was ready`));
    worker.once("message", onMessage).once("error", onError).once("exit", onExit);
  });
  // Only our own listeners go: removeAllListeners() would also remove the Worker's internal ones, after
  // which messages from the thread are never delivered again.
  if (onMessage) worker.removeListener("message", onMessage);
  if (onError) worker.removeListener("error", onError);
  if (onExit) worker.removeListener("exit", onExit);
  // A service thread that dies takes the process with it: a supervisor then restarts everything, rather
  // than leaving an edge that accepts work no runner will do. (Jobs and events wait in JetStream.)
  worker.on("error", (error) => {
    process.stderr.write(`reelay: the ${data.service} thread failed: ${error.stack ?? String(error)}\n`);
    process.exit(1);
  });
  const waiting = new Map<number, (metrics: MetricsSnapshot) => void>();
  let nextId = 0;
  worker.on("message", (message: { type?: string; id?: number; metrics?: MetricsSnapshot }) => {
    if (message.type !== "metrics" || message.id === undefined) return;
    waiting.get(message.id)?.(message.metrics ?? []);
  });
  return {
    metrics: () =>
      new Promise<MetricsSnapshot>((resolve) => {
        const id = ++nextId;
        const timer = setTimeout(() => settle([]), METRICS_WAIT_MS);
        function settle(metrics: MetricsSnapshot) {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(metrics);
        }
        waiting.set(id, settle);
        worker.postMessage({ type: "metrics", id });
      }),
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
