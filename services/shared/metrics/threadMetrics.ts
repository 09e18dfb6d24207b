import { constants, monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from "node:perf_hooks";
import { collectDefaultMetrics, Counter, Gauge } from "prom-client";
import { registry } from "./metrics.ts";

let started = false;

/** V8's kinds of collection as `perf_hooks` numbers them, by the name the metric gives them. */
const GC_KINDS = new Map<number, string>([
  [constants.NODE_PERFORMANCE_GC_MINOR, "minor"],
  [constants.NODE_PERFORMANCE_GC_MAJOR, "major"],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, "incremental"],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, "weakcb"],
]);

/**
 * The time V8's collector paused this thread, by kind. prom-client's default GC histogram sees the main thread
 * only; the runner's young-generation collections are the pauses that reach a create's latency.
 */
function countGcPauses(thread: string): void {
  const paused = new Counter({
    name: "reelay_thread_gc_pause_seconds_total",
    help: "Time this thread's event loop was paused by V8's garbage collector, by kind (minor: young generation; major: whole heap).",
    labelNames: ["thread", "kind"] as const,
    registers: [registry],
  });
  // A gc entry's `detail` holds its kind (Node's types for PerformanceEntry leave it out).
  const kindOf = (entry: PerformanceEntry & { detail?: { kind?: number } }): string => GC_KINDS.get(entry.detail?.kind ?? -1) ?? "other";
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) paused.inc({ thread, kind: kindOf(entry) }, entry.duration / 1000);
  }).observe({ entryTypes: ["gc"] });
}

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
  countGcPauses(thread);
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
