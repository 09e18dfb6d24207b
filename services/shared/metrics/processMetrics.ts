import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import { registry } from "./metrics.ts";

export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/** A source of metrics beside this thread's registry: a service thread answering over its port. */
export type ThreadMetrics = () => Promise<MetricsSnapshot>;

const threads = new Set<ThreadMetrics>();

/** Adds a service thread's metrics to this process's scrapes; returns the removal. */
export function addThreadMetrics(source: ThreadMetrics): () => void {
  threads.add(source);
  return () => threads.delete(source);
}

/**
 * This process's metrics in the Prometheus text format: the main thread's registry merged with every
 * service thread's (counters and histograms of the same series add up; thread gauges carry a label).
 */
export async function collectProcessMetrics(): Promise<{ contentType: string; text: string }> {
  if (threads.size === 0) return { contentType: registry.contentType, text: await registry.metrics() };
  const snapshots = await Promise.all([registry.getMetricsAsJSON(), ...[...threads].map((read) => read().catch(() => []))]);
  const merged = AggregatorRegistry.aggregate(snapshots as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  return { contentType: registry.contentType, text: await merged.metrics() };
}
