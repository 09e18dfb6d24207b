import type { JetStreamManager } from "@nats-io/jetstream";
import { Gauge } from "prom-client";
import { durableConsumers } from "../../../infra/jetstreamLayout.ts";
import { readConsumerFloor } from "../consumerFloor.ts";
import { registry } from "./metrics.ts";

/** How far one durable consumer is behind, read from the server at scrape time. */
export interface ConsumerLag {
  consumer: string;
  /** Messages not yet delivered to it. */
  pending: number;
  /** Delivered and not yet acknowledged (for the runners: live tasks). */
  ackPending: number;
  /** Age of the oldest message it has not acknowledged yet; 0 when it is caught up. */
  oldestAgeSeconds: number;
}

export async function readConsumerLag(jsm: JetStreamManager): Promise<ConsumerLag[]> {
  const now = Date.now();
  return Promise.all(
    durableConsumers().map(async ({ stream, durable }) => {
      const { pending, ackPending, oldestOwedAt } = await readConsumerFloor(jsm, stream, durable);
      const oldestAgeSeconds = oldestOwedAt === undefined ? 0 : Math.max(0, (now - oldestOwedAt.getTime()) / 1000);
      return { consumer: `${stream}/${durable}`, pending, ackPending, oldestAgeSeconds };
    }),
  );
}

/** Registers the consumer-lag gauges, filled from the server on each scrape (one process per deployment is enough). */
export function registerConsumerLagMetrics(jsm: JetStreamManager): void {
  let latest: Promise<ConsumerLag[]> | undefined;
  // One read per scrape, shared by the three gauges (each runs its own collect, one after the other).
  const read = () => {
    latest ??= readConsumerLag(jsm).finally(() => setTimeout(() => (latest = undefined), 250).unref());
    return latest;
  };
  const gauge = (name: string, help: string, pick: (lag: ConsumerLag) => number) => {
    // A process that connects again (tests start services repeatedly) reads from its newest connection.
    registry.removeSingleMetric(name);
    return new Gauge({
      name,
      help,
      labelNames: ["consumer"] as const,
      registers: [registry],
      async collect() {
        const lags = await read().catch(() => []);
        this.reset();
        for (const lag of lags) this.set({ consumer: lag.consumer }, pick(lag));
      },
    });
  };
  gauge("reelay_consumer_pending_messages", "Messages a durable consumer has not been delivered yet (stream/consumer).", (l) => l.pending);
  gauge("reelay_consumer_ack_pending_messages", "Messages delivered to a durable consumer and not yet acknowledged.", (l) => l.ackPending);
  gauge(
    "reelay_consumer_oldest_unacked_age_seconds",
    "Age of the oldest message a durable consumer has not acknowledged: projection or reactor lag (for the runners: the oldest live or waiting task).",
    (l) => l.oldestAgeSeconds,
  );
}
