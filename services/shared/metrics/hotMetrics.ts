import type { MetricValueWithName, Registry } from "prom-client";

/**
 * Counters and histograms for the per-request path, exposed through prom-client's registry.
 *
 * Why not prom-client's own: its `inc`/`observe` validate and hash the label object on every call, even
 * through a `labels()` child. The query bench measured that at about 4% of an edge answering cached task
 * queries, against issue 10's budget of 3% for all metrics. Here a child is resolved once per label set and
 * an observation is a bucket search and two additions; prom-client still does exposition and the merging of
 * threads (`get()` answers in the shape its own metrics do, so `AggregatorRegistry.aggregate` sums them).
 */

type Labels<Name extends string> = Readonly<Record<Name, string>>;

/** A scrape of one metric, as prom-client's own metrics answer `get()`. */
interface HotMetricValues {
  name: string;
  help: string;
  type: "counter" | "histogram";
  aggregator: "sum";
  values: MetricValueWithName<string>[];
}

interface HotMetricOptions<Name extends string> {
  name: string;
  help: string;
  labelNames: readonly Name[];
  registers: readonly Registry[];
}

/** What prom-client's registry needs of a metric: a name, and its values when scraped. */
abstract class HotMetric<Name extends string, Child> {
  readonly name: string;
  readonly help: string;
  private readonly children = new Map<string, { labels: Labels<Name>; child: Child }>();
  private readonly labelNames: readonly Name[];

  constructor(options: HotMetricOptions<Name>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  /** The child of one label set: resolve it once and keep it (the point of this class). */
  labels(labels: Labels<Name>): Child {
    const key = this.labelNames.map((name) => labels[name]).join("\u0000");
    let entry = this.children.get(key);
    if (!entry) {
      entry = { labels: { ...labels }, child: this.newChild() };
      this.children.set(key, entry);
    }
    return entry.child;
  }

  protected abstract newChild(): Child;
  protected abstract valuesOf(labels: Labels<Name>, child: Child): MetricValueWithName<string>[];
  abstract readonly type: "counter" | "histogram";

  get(): Promise<HotMetricValues> {
    const values: MetricValueWithName<string>[] = [];
    for (const { labels, child } of this.children.values()) values.push(...this.valuesOf(labels, child));
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, values, aggregator: "sum" });
  }

  /** prom-client's registry calls these on `resetMetrics()` and `getSingleMetric`; nothing to reset per scrape. */
  reset(): void {
    this.children.clear();
  }
}

export class HotCounterChild {
  value = 0;
  inc(amount = 1): void {
    this.value += amount;
  }
}

export class HotCounter<Name extends string> extends HotMetric<Name, HotCounterChild> {
  readonly type = "counter";
  protected newChild(): HotCounterChild {
    return new HotCounterChild();
  }
  protected valuesOf(labels: Labels<Name>, child: HotCounterChild): MetricValueWithName<string>[] {
    return [{ labels, value: child.value, metricName: this.name }];
  }
}

export class HotHistogramChild {
  /** counts[i]: observations in bucket i (not cumulative; the last one is +Inf). */
  readonly counts: Float64Array;
  sum = 0;
  constructor(private readonly upperBounds: readonly number[]) {
    this.counts = new Float64Array(upperBounds.length + 1);
  }
  observe(value: number): void {
    const bounds = this.upperBounds;
    let bucket = 0;
    while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++;
    this.counts[bucket] = (this.counts[bucket] as number) + 1;
    this.sum += value;
  }
}

export class HotHistogram<Name extends string> extends HotMetric<Name, HotHistogramChild> {
  readonly type = "histogram";
  private readonly buckets: readonly number[];
  constructor(options: HotMetricOptions<Name> & { buckets: readonly number[] }) {
    super(options);
    this.buckets = [...options.buckets].sort((a, b) => a - b);
  }
  protected newChild(): HotHistogramChild {
    return new HotHistogramChild(this.buckets);
  }
  protected valuesOf(labels: Labels<Name>, child: HotHistogramChild): MetricValueWithName<string>[] {
    const values: MetricValueWithName<string>[] = [];
    let cumulative = 0;
    for (let i = 0; i <= this.buckets.length; i++) {
      cumulative += child.counts[i] as number;
      const le = i < this.buckets.length ? (this.buckets[i] as number) : "+Inf";
      values.push({ labels: { ...labels, le }, value: cumulative, metricName: `${this.name}_bucket` });
    }
    values.push({ labels, value: child.sum, metricName: `${this.name}_sum` });
    values.push({ labels, value: cumulative, metricName: `${this.name}_count` });
    return values;
  }
}
