import { Counter, Gauge, Registry } from "prom-client";
import { HotCounter, HotHistogram } from "./hotMetrics.ts";

/**
 * Every metric reelay exports, in one place. One registry per thread (the edge on the main thread, the
 * runner and the projector on threads of their own); `collectProcessMetrics` merges them for a scrape.
 *
 * Label values are bounded: routes, models, providers, outcomes, consumers — never task ids, keys or
 * accounts, so a client cannot grow the series count (and with it the process's memory).
 */
export const registry = new Registry();

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const UPSTREAM_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export const httpRequests = new HotCounter({
  name: "reelay_http_requests_total",
  help: "HTTP requests answered by the edge, by route and status code.",
  labelNames: ["route", "code"] as const,
  registers: [registry],
});

export const httpRequestDuration = new HotHistogram({
  name: "reelay_http_request_duration_seconds",
  help: "Time from a request's arrival to its answer (for streams: to the end of the stream), by route.",
  labelNames: ["route"] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const chatTimeToFirstChunk = new HotHistogram({
  name: "reelay_chat_time_to_first_chunk_seconds",
  help: "Time from a streamed chat request's arrival to its first chunk reaching the client, by model.",
  labelNames: ["model"] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const chatTokens = new Counter({
  name: "reelay_chat_tokens_total",
  help: "Chat tokens billed, by model and kind (prompt or completion).",
  labelNames: ["model", "kind"] as const,
  registers: [registry],
});

export const tasksCreated = new Counter({
  name: "reelay_video_tasks_created_total",
  help: "Video tasks created (their opening, which reserves the estimated cost, written), by model.",
  labelNames: ["model"] as const,
  registers: [registry],
});

export const settlementProblems = new Counter({
  name: "reelay_settlement_problems_total",
  help: "Final video tasks whose money could not be settled (kind: not_reserved = the task had no open reservation to charge or release). Any is a bug to look into: run `reelay audit`.",
  labelNames: ["kind"] as const,
  registers: [registry],
});

export const chatChargesUnwritten = new Counter({
  name: "reelay_chat_charges_unwritten_total",
  help: "Chat answers relayed whose charge could not be written, however often it was tried (up to about 105 s, or once more as the edge stopped): unpaid, their holds lapse. Any is worth a look at NATS.",
  registers: [registry],
});

export const tasksFinished = new Counter({
  name: "reelay_video_tasks_finished_total",
  help: "Video tasks that reached a final state in this process's runner, by provider and outcome (success or failed).",
  labelNames: ["provider", "outcome"] as const,
  registers: [registry],
});

/** A live task as the runner's gauges see it at scrape time. */
export interface LiveTask {
  provider: string;
  state: "pending" | "running";
  pastDeadline: boolean;
}

const liveTaskSources = new Set<() => Iterable<LiveTask>>();

/**
 * Runners report their live tasks through this: the gauges are computed at scrape time from the actors
 * themselves (no bookkeeping on the hot path, nothing to drift). Returns the removal, for a stopping runner.
 */
export function reportLiveTasks(source: () => Iterable<LiveTask>): () => void {
  liveTaskSources.add(source);
  return () => liveTaskSources.delete(source);
}

function* liveTasks(): Iterable<LiveTask> {
  for (const source of liveTaskSources) yield* source();
}

export const tasksInFlight = new Gauge({
  name: "reelay_video_tasks_in_flight",
  help: "Live video tasks hosted by this process's runner, by provider and state (pending or running).",
  labelNames: ["provider", "state"] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const task of liveTasks()) this.inc({ provider: task.provider, state: task.state });
  },
});

export const tasksPastDeadline = new Gauge({
  name: "reelay_video_tasks_past_deadline",
  help: "Live tasks hosted by this process's runner whose deadline has passed without a final state (should fail within moments).",
  registers: [registry],
  collect() {
    let past = 0;
    for (const task of liveTasks()) if (task.pastDeadline) past++;
    this.set(past);
  },
});

// Hot metrics: every upstream call (three or more per task) counts and times itself.
export const upstreamCalls = new HotCounter({
  name: "reelay_upstream_calls_total",
  help: "Calls to video providers (channels), by provider entry, operation and outcome (ok, rejected, unavailable, misconfigured, error).",
  labelNames: ["provider", "operation", "outcome"] as const,
  registers: [registry],
});

export const upstreamCallDuration = new HotHistogram({
  name: "reelay_upstream_call_duration_seconds",
  help: "Latency of calls to video providers, by provider entry and operation.",
  labelNames: ["provider", "operation"] as const,
  buckets: UPSTREAM_BUCKETS,
  registers: [registry],
});

export const ledgerMovements = new Counter({
  name: "reelay_ledger_movements_yuan_total",
  help: "Money written to the ledger by this process, in yuan, by kind (credited, reserved, settled, released, chat_reserved, chat_lapsed, chat_charged).",
  labelNames: ["kind"] as const,
  registers: [registry],
});

export const ledgerLostWrites = new Counter({
  name: "reelay_ledger_lost_writes_total",
  help: "Money writes of this process that lost their account's guard to another writer's and were decided again, by what they wrote (open: a create's opening, close: settlements and releases, other). One process writes each account alone; these are races between processes.",
  labelNames: ["what"] as const,
  registers: [registry],
});

export const runnerHeartbeat = new Gauge({
  name: "reelay_runner_heartbeat_timestamp_seconds",
  help: "Unix time of this process's runner's last heartbeat round (it beats every leaseMs / 3 while it runs).",
  registers: [registry],
});

export const natsConnected = new Gauge({
  name: "reelay_nats_connected",
  help: "1 while this process's NATS connection is up, 0 while it is down.",
  registers: [registry],
});

export const sseStreamsOpen = new Gauge({
  name: "reelay_sse_streams_open",
  help: "Task event streams (SSE) open on this process's edge.",
  registers: [registry],
});

export const upstreamCallbacks = new Counter({
  name: "reelay_upstream_callbacks_total",
  help: "Vendor callbacks that named a task, by outcome: relayed (its runner asks the vendor now) or dropped (past the edge's budget of callbacks a second: the task is polled on its schedule).",
  labelNames: ["outcome"] as const,
  registers: [registry],
});

export const webhookDeliveries = new Counter({
  name: "reelay_webhook_deliveries_total",
  help: "Webhook delivery attempts by outcome (delivered, failed: to be retried, gave_up).",
  labelNames: ["outcome"] as const,
  registers: [registry],
});
