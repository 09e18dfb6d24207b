import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";

/** Every stream, bucket and durable consumer reelay uses, as data. `ensureJetStreamLayout` makes them exist. */
export const STREAMS = {
  /** The task log: every transition of task N is an event on tasks.N. */
  tasks: { name: "TASKS", subjects: ["tasks.>"], retention: RetentionPolicy.Limits, allow_direct: true },
  /** Submitted video jobs waiting for, or held by, a runner: task N's job is on work.video.N. */
  work: { name: "WORK", subjects: ["work.video.>"], retention: RetentionPolicy.Workqueue, allow_direct: true },
  /** Finished tasks waiting to be settled or released on the ledger. */
  settlements: { name: "SETTLEMENTS", subjects: ["settle.video"], retention: RetentionPolicy.Workqueue, allow_direct: false },
  /** Every money movement of account A is an event on ledger.A. */
  ledger: { name: "LEDGER", subjects: ["ledger.>"], retention: RetentionPolicy.Limits, allow_direct: true },
  /**
   * Task ids: the sequence of a publish here is the next id — unique and increasing across every edge,
   * never reused. Only the last message is kept; the sequence goes on.
   */
  taskIds: { name: "TASK_IDS", subjects: ["task-ids"], retention: RetentionPolicy.Limits, allow_direct: false, max_msgs: 1 },
} as const;

export const BUCKETS = {
  apiKeys: "api_keys",
  taskViews: "task_views",
  balances: "balances",
  taskCharges: "task_charges",
  /** Each account's writer state every few hundred events (services/billing/accountLedger.ts). */
  ledgerSnapshots: "ledger_snapshots",
  /** Idempotency-Key of a create → the task it made, per account. */
  idempotency: "idempotency",
} as const;

/** Buckets whose entries carry their own TTL (per-message TTL, nats-server 2.11+): no bucket-wide max age. */
const BUCKETS_WITH_MESSAGE_TTL: ReadonlySet<string> = new Set([BUCKETS.idempotency]);

export const workSubject = (taskId: number): string => `work.video.${taskId}`;

export const OBJECT_STORES = { videos: "videos" } as const;

export const CONSUMERS = {
  runners: "runners",
  taskViewProjector: "projector_task_views",
  balancesProjector: "projector_balances",
  taskChargesProjector: "projector_task_charges",
  /** Turns finished tasks into settlements and releases. */
  settlers: "settlers",
} as const;

export interface LayoutOptions {
  /** 1 on a single server, 3 on a cluster. */
  replicas: number;
  /**
   * How long a consumer may hold a job or event without acking (runners heartbeat) before it is handed
   * to another instance: the recovery time after a crash.
   */
  leaseMs: number;
}

const nanos = (ms: number) => ms * 1_000_000;

function streamConfig(def: (typeof STREAMS)[keyof typeof STREAMS], replicas: number): Partial<StreamConfig> & { name: string } {
  return {
    name: def.name,
    subjects: [...def.subjects],
    retention: def.retention,
    storage: StorageType.File,
    num_replicas: replicas,
    allow_direct: def.allow_direct,
    duplicate_window: nanos(2 * 60_000),
    ...("max_msgs" in def ? { max_msgs: def.max_msgs } : {}),
  };
}

/** A durable that reads a whole stream in order, from the beginning, acknowledging each message. */
function durableConsumer(stream: string, durable: string, ackWaitMs: number): { stream: string; config: Partial<ConsumerConfig> } {
  return {
    stream,
    config: {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ackWaitMs),
      max_ack_pending: 20_000,
      max_deliver: -1,
    },
  };
}

function consumerConfigs(options: LayoutOptions): Array<{ stream: string; config: Partial<ConsumerConfig> }> {
  return [
    {
      stream: STREAMS.work.name,
      config: {
        durable_name: CONSUMERS.runners,
        ack_policy: AckPolicy.Explicit,
        // A runner holds a job unacked until its task is final and heartbeats it with `working()`.
        ack_wait: nanos(options.leaseMs),
        max_ack_pending: 100_000,
        max_deliver: -1,
      },
    },
    durableConsumer(STREAMS.tasks.name, CONSUMERS.taskViewProjector, options.leaseMs),
    durableConsumer(STREAMS.settlements.name, CONSUMERS.settlers, options.leaseMs),
    durableConsumer(STREAMS.ledger.name, CONSUMERS.balancesProjector, options.leaseMs),
    durableConsumer(STREAMS.ledger.name, CONSUMERS.taskChargesProjector, options.leaseMs),
  ];
}

/**
 * Turns on per-message TTL for a bucket's stream (new, or created by an older reelay with a bucket-wide
 * max age, which is kept: it only ever ends a key at the same time or later). It cannot be turned off again.
 */
async function allowMessageTtl(jsm: JetStreamManager, stream: string): Promise<void> {
  const { config } = await jsm.streams.info(stream);
  if (!config.allow_msg_ttl) await jsm.streams.update(stream, { ...config, allow_msg_ttl: true });
}

/** Adding what exists with another config is refused with an API error (the code differs by server version). */
const existsWithOtherConfig = (error: unknown) => error instanceof JetStreamApiError;

/** Idempotent: creates what is missing and brings what exists up to date. */
export async function ensureJetStreamLayout(nc: NatsConnection, jsm: JetStreamManager, options: LayoutOptions): Promise<void> {
  for (const def of Object.values(STREAMS)) {
    const config = streamConfig(def, options.replicas);
    try {
      await jsm.streams.add(config);
    } catch (error) {
      if (!existsWithOtherConfig(error)) throw error;
      const { retention: _fixedAtCreation, ...updatable } = config;
      await jsm.streams.update(def.name, updatable);
    }
  }
  const kvm = new Kvm(nc);
  for (const bucket of Object.values(BUCKETS)) {
    await kvm.create(bucket, { history: 1, replicas: options.replicas });
    if (BUCKETS_WITH_MESSAGE_TTL.has(bucket)) await allowMessageTtl(jsm, `KV_${bucket}`);
  }
  await new Objm(nc).create(OBJECT_STORES.videos, { replicas: options.replicas });
  for (const { stream, config } of consumerConfigs(options)) {
    try {
      await jsm.consumers.add(stream, config);
    } catch (error) {
      if (!existsWithOtherConfig(error)) throw error;
      await jsm.consumers.update(stream, config.durable_name ?? "", config);
    }
  }
}
