import { monitorEventLoopDelay } from "node:perf_hooks";
import { collectDefaultMetrics, Gauge } from "prom-client";
import { registry } from "./metrics.ts";

let started = false;

/**
 * Event-loop delay and heap of this thread, labelled with its name (a slow runner thread must not hide
 * behind a quick edge), and on the main thread the process-wide defaults (CPU, RSS, handles, GC).
 */
export function startThreadMetrics(thread: string, options: { processDefaults: boolean }): void {
  if (started) return;
  started = true;
  if (options.processDefaults) {
    collectDefaultMetrics({ register: registry, prefix: "reelay_" });
    // prom-client names these gauges *_total, which Prometheus reserves for counters (promtool refuses them).
    for (const name of ["active_handles_total", "active_requests_total", "active_resources_total"]) registry.removeSingleMetric(`reelay_nodejs_${name}`);
  }
  const delay = monitorEventLoopDelay({ resolution: 20 });
  delay.enable();
  new Gauge({
    name: "reelay_thread_event_loop_delay_p99_seconds",
    help: "99th percentile of this thread's event-loop delay since the previous scrape.",
    labelNames: ["thread"] as const,
    registers: [registry],
    collect() {
      this.set({ thread }, delay.percentile(99) / 1e9);
      delay.reset();
    },
  });
  new Gauge({
    name: "reelay_thread_heap_used_bytes",
    help: "V8 heap in use by this thread.",
    labelNames: ["thread"] as const,
    registers: [registry],
    collect() {
      this.set({ thread }, process.memoryUsage().heapUsed);
    },
  });
}
