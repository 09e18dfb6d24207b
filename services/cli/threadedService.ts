import { setTimeout as sleep } from "node:timers/promises";
import { Worker, type MessagePort } from "node:worker_threads";
import { ConfigError } from "../shared/config.ts";
import type { Logger } from "../shared/log.ts";
import type { MetricsSnapshot } from "../shared/metrics/processMetrics.ts";
import type { ServiceThreadData, StartFailed } from "./serviceThread.ts";

/** A scrape that a busy thread cannot answer within this gets the other threads' metrics only. */
const METRICS_WAIT_MS = 2_000;

/** Stopping normally takes a second or two; this bounds it when NATS is gone (work left unacked is redelivered). */
const STOP_GRACE_MS = 8_000;
/** The thread's module, compiled beside this one (scripts/build.mjs): `reelay serve` runs from the build only. */
const ENTRY = new URL("./serviceThread.js", import.meta.url);

/**
 * The young generation of a service thread's heap: twice V8's default (semi-spaces of 32 MB instead of 16). The
 * runner allocates about 150 KB per create (mostly xstate's transitions) and scavenged every 100 ms at 1,000
 * creates/s, each scavenge a pause of its event loop while it holds 10,000 live tasks; with twice the room it
 * scavenges half as often, and less of what it copies is still alive (bench/tools/createLatency.ts, docs/benchmarks.md).
 */
const YOUNG_GENERATION_MB = 96;

/** Pauses before starting a thread again after passing NATS trouble at its start (then it gives up). */
const RESTART_PAUSES_MS = [1_000, 2_000, 4_000, 8_000];

type ServiceThread = { stop(): Promise<void>; metrics(): Promise<MetricsSnapshot> };

/** A service thread's start failed; `passing`: on NATS trouble that may be gone in a moment. */
class ThreadStartFailed extends Error {
  constructor(
    message: string,
    readonly passing: boolean,
  ) {
    super(message);
  }
}

const isStartFailed = (message: unknown): message is StartFailed =>
  typeof message === "object" && message !== null && (message as { type?: unknown }).type === "startFailed";

/**
 * Runs the runner or the projector on a thread of its own, so one `reelay serve` process uses more than
 * one core (Node runs JavaScript on one thread; the edge keeps the main one). Resolves once it is ready.
 * A thread whose start fails on passing NATS trouble (a JetStream request timing out right after the
 * server restarted) ends with all it had started, and a new one starts after a pause, a few times.
 */
export async function startServiceThread(data: ServiceThreadData, log: Logger, options: { closes?: () => MessagePort } = {}): Promise<ServiceThread> {
  for (let attempt = 0; ; attempt++) {
    try {
      // A port is transferred to one thread only: each attempt gets one of its own.
      const closes = options.closes?.();
      return await startThreadOnce(closes ? { ...data, closes } : data);
    } catch (error) {
      const pauseMs = RESTART_PAUSES_MS[attempt];
      if (!(error instanceof ThreadStartFailed && error.passing) || pauseMs === undefined) throw error;
      log.warn({ err: error, attempt: attempt + 1, pauseMs }, `the ${data.service} thread could not start (passing NATS trouble); starting it again`);
      await sleep(pauseMs);
    }
  }
}

async function startThreadOnce(data: ServiceThreadData): Promise<ServiceThread> {
  const worker = new Worker(ENTRY, { workerData: data, transferList: data.closes ? [data.closes] : [], resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
  let onMessage: ((message: unknown) => void) | undefined;
  let onError: ((error: Error) => void) | undefined;
  let onExit: ((code: number) => void) | undefined;
  await new Promise<void>((resolve, reject) => {
    onMessage = (message) => {
      if (message === "ready") resolve();
      else if (isStartFailed(message)) {
        const detail = `the ${data.service} thread could not start: ${message.message}`;
        reject(message.forOperator ? new ConfigError(detail) : new ThreadStartFailed(detail, message.passing));
      }
      else reject(new Error(String(message)));
    };
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
