import type { ConsumerConfig, JetStreamManager, StreamConfig } from "@nats-io/jetstream";
import { consumerConfigs, storeStreams, streamConfigs, type LayoutOptions } from "./jetstreamLayout.ts";

/** One setting of an existing stream or consumer that differs from what the layout asks for. */
export interface LayoutChange {
  /** "stream EVENTS" or "consumer EVENTS/projector_balances". */
  target: string;
  field: string;
  current: unknown;
  desired: unknown;
}

export interface LayoutPlan {
  changes: LayoutChange[];
  /** Applies every change, one update per stream or consumer. */
  apply(): Promise<void>;
}

/** Settings reelay manages; others (set by an operator by hand, or by the server) are left alone. */
const STREAM_FIELDS = ["subjects", "num_replicas", "max_age", "max_msgs", "duplicate_window", "allow_direct", "allow_msg_ttl", "max_msgs_per_subject", "max_bytes"] as const;
const CONSUMER_FIELDS = ["ack_wait", "max_ack_pending", "max_deliver"] as const;

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

function differences<T extends object>(target: string, current: T, desired: Partial<T>, fields: readonly (keyof T & string)[]): LayoutChange[] {
  return fields
    .filter((field) => field in desired && !same(current[field], desired[field]))
    .map((field) => ({ target, field, current: current[field], desired: desired[field] }));
}

/**
 * Compares the running layout with the one asked for (replicas, consumers' ack wait from `leaseMs`).
 * Only existing streams and consumers are compared: missing ones are made by every start anyway.
 */
export async function planLayoutChanges(jsm: JetStreamManager, options: LayoutOptions): Promise<LayoutPlan> {
  const changes: LayoutChange[] = [];
  const updates: Array<() => Promise<unknown>> = [];
  const streams: Array<{ name: string; config: Partial<StreamConfig> }> = [
    ...streamConfigs(options).map((config) => ({ name: config.name, config })),
    ...storeStreams(options),
  ];
  for (const { name, config } of streams) {
    const info = await jsm.streams.info(name).catch(() => undefined);
    if (!info) continue;
    const found = differences(`stream ${name}`, info.config, config, STREAM_FIELDS);
    if (found.length === 0) continue;
    changes.push(...found);
    const patch = Object.fromEntries(found.map((change) => [change.field, change.desired]));
    updates.push(() => jsm.streams.update(name, { ...info.config, ...patch }));
  }
  for (const { stream, config } of consumerConfigs(options)) {
    const durable = config.durable_name ?? "";
    const info = await jsm.consumers.info(stream, durable).catch(() => undefined);
    if (!info) continue;
    const found = differences<ConsumerConfig>(`consumer ${stream}/${durable}`, info.config, config, CONSUMER_FIELDS);
    if (found.length === 0) continue;
    changes.push(...found);
    const patch = Object.fromEntries(found.map((change) => [change.field, change.desired]));
    updates.push(() => jsm.consumers.update(stream, durable, patch));
  }
  return {
    changes,
    apply: async () => {
      for (const update of updates) await update();
    },
  };
}

const shown = (field: string, value: unknown) =>
  (field === "ack_wait" || field === "max_age" || field === "duplicate_window") && typeof value === "number" ? `${value / 1e9}s` : JSON.stringify(value ?? null);

export function describeChanges(changes: readonly LayoutChange[]): string {
  if (changes.length === 0) return "the layout is as configured: nothing to change";
  return changes.map((c) => `${c.target}: ${c.field} ${shown(c.field, c.current)} → ${shown(c.field, c.desired)}`).join("\n");
}
