import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
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
import { FIRST_TASK_EVENTS } from "../contracts/videoTask.ts";

/** Every stream, bucket and durable consumer reelay uses, as data. `ensureJetStreamLayout` makes them exist. */
export const STREAMS = {
  /**
   * The task log: every transition of task N is an event, the first (written by the edge) on tasks.N and
   * the later ones on tasks.N.next. Runners take new tasks from the first events (consumer `runners`).
   */
  tasks: { name: "TASKS", subjects: ["tasks.>"], retention: RetentionPolicy.Limits, allow_direct: true },
  /** Every money movement of account A is an event on ledger.A. */
  ledger: { name: "LEDGER", subjects: ["ledger.>"], retention: RetentionPolicy.Limits, allow_direct: true },
  /**
   * Task ids before blocks (an older reelay): the sequence of a publish here was the next id. Kept, so the
   * counter below starts above every id it handed out.
   */
  taskIds: { name: "TASK_IDS", subjects: ["task-ids"], retention: RetentionPolicy.Limits, allow_direct: false, max_msgs: 1 },
  /**
   * Task ids in blocks: a counter (nats-server 2.12+) that an edge increments by a block size; the value
   * returned is the block's last id, so blocks of every edge are disjoint and never reused.
   */
  taskIdCounter: {
    name: "TASK_ID_COUNTER",
    subjects: ["task-id-counter"],
    retention: RetentionPolicy.Limits,
    allow_direct: true,
    allow_msg_counter: true,
    max_msgs_per_subject: 1,
  },
  /**
   * Events no reader could decode, parked for an operator: `deadletter.<reader>`, the original bytes
   * with headers naming the stream, sequence and error. Readers move on instead of stalling.
   */
  deadLetters: { name: "DEAD_LETTERS", subjects: ["deadletter.>"], retention: RetentionPolicy.Limits, allow_direct: true },
  /** Every change made through the admin API, with the admin token's name (contracts/admin.ts AdminAction). */
  adminLog: {
    name: "ADMIN_LOG",
    subjects: ["adminlog.>"],
    retention: RetentionPolicy.Limits,
    allow_direct: true,
    max_age_ms: 400 * 24 * 60 * 60_000,
  },
  /**
   * Webhooks to deliver: one job per status change of a task with a callback URL on webhookjobs.N, put there
   * by the task-log reactors and removed when delivered or given up (a work queue, consumer `webhooks`).
   * Tasks without a callback URL cost nothing here. A job outlives any retry period at most a week.
   */
  webhookJobs: {
    name: "WEBHOOK_JOBS",
    subjects: ["webhookjobs.>"],
    retention: RetentionPolicy.Workqueue,
    allow_direct: true,
    max_age_ms: 7 * 24 * 60 * 60_000,
  },
  /**
   * Webhook delivery attempts of account A on webhooklog.A, for `reelay webhooks log`: the last 200 per
   * account, a week at most. A record of what happened, not a source of truth.
   */
  webhookLog: {
    name: "WEBHOOK_LOG",
    subjects: ["webhooklog.>"],
    retention: RetentionPolicy.Limits,
    allow_direct: true,
    max_msgs_per_subject: 200,
    max_age_ms: 7 * 24 * 60 * 60_000,
  },
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
  /** Each account's webhook signing secret (and the previous one for a day after a rotation). */
  webhookSecrets: "webhook_secrets",
  /** `<account>.<task id, 15 digits>` → the task's status: the task list's index, newest last in key order. */
  accountTasks: "account_tasks",
  /** Operators' admin tokens, stored as hashes (contracts/admin.ts). */
  adminTokens: "admin_tokens",
  /** Task counters by status, hour and day/account/model for the admin dashboard and usage (contracts/taskStats.ts). */
  taskStats: "task_stats",
} as const;


/** Buckets whose entries carry their own TTL (per-message TTL, nats-server 2.11+): no bucket-wide max age. */
const BUCKETS_WITH_MESSAGE_TTL: ReadonlySet<string> = new Set([BUCKETS.idempotency]);

export const deadLetterSubject = (reader: string): string => `deadletter.${reader.replace(/[^A-Za-z0-9_-]/g, "_")}`;

export const webhookLogSubject = (account: string): string => `webhooklog.${account}`;

export const webhookJobSubject = (taskId: number): string => `webhookjobs.${taskId}`;

/**
 * The work queue of reelay before the edge wrote the first event itself: jobs on work.video.N, held by
 * runners through the durable `runners`. No longer created; on a store that has it, runners drain what an
 * older edge queued there (services/runner/legacyWorkQueue.ts).
 */
export const LEGACY_WORK = { stream: "WORK", durable: "runners", subject: (taskId: number): string => `work.video.${taskId}` } as const;

export const OBJECT_STORES = { videos: "videos" } as const;

export const CONSUMERS = {
  runners: "runners",
  /**
   * Every reactor on the task log, through one delivery (services/projector/taskLogReactors.ts): the views
   * (`task_views`), each account's task index (`account_tasks`), the counters (`task_stats`), settlement, and
   * the webhook jobs.
   */
  taskLogReactors: "task_log_reactors",
  balancesProjector: "projector_balances",
  taskChargesProjector: "projector_task_charges",
  /** Delivers the webhook jobs (stream WEBHOOK_JOBS) to callback URLs. */
  webhooks: "webhooks",
} as const;

export interface LayoutOptions {
  /** 1 on a single server, 3 on a cluster. */
  replicas: number;
  /**
   * How long a consumer may hold a job or event without acking (runners heartbeat) before it is handed
   * to another instance: the recovery time after a crash.
   */
  leaseMs: number;
  /** How long a copied video is kept in the object store (config `videos.retentionDays`); absent: for good. */
  videoRetentionMs?: number;
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
    ...("allow_msg_counter" in def ? { allow_msg_counter: def.allow_msg_counter } : {}),
    ...("max_msgs_per_subject" in def ? { max_msgs_per_subject: def.max_msgs_per_subject } : {}),
    ...("max_age_ms" in def ? { max_age: nanos(def.max_age_ms) } : {}),
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

/** The priority group every reactor consumer has: its pinned process is the only one that reads. */
export const REACTOR_GROUP = "reactors";

/**
 * A durable for a batch reactor (services/shared/batchReactor.ts): the whole stream in order, one
 * acknowledgement per batch (`ack_policy: all`), and a pinned-client priority group, so one process reads
 * at a time and acknowledging a batch can never acknowledge another process's messages; when the pinned
 * process stops pulling for `ackWaitMs`, another one is pinned and takes over from the last acknowledgement.
 */
function reactorConsumer(stream: string, durable: string, ackWaitMs: number): { stream: string; config: Partial<ConsumerConfig> } {
  const { config } = durableConsumer(stream, durable, ackWaitMs);
  return {
    stream,
    config: {
      ...config,
      ack_policy: AckPolicy.All,
      priority_groups: [REACTOR_GROUP],
      priority_policy: "pinned_client",
      priority_timeout: nanos(ackWaitMs),
    },
  };
}

/**
 * The consumers of older reelays on the task log whose work `task_log_reactors` does: it starts where they
 * had all got to (read models, settlement and webhooks each had their own; then the read models shared one).
 */
const TASK_LOG_REACTORS_BEFORE = ["projector_task_read_models", "settlement", "webhooks", "projector_task_views", "projector_task_index", "projector_task_stats"];

interface ConsumerDefinition {
  stream: string;
  config: Partial<ConsumerConfig>;
  /** Consumers of an older reelay whose work this one does: made on such a store, it starts after the last message all of them acknowledged. */
  replaces?: readonly string[];
}

function consumerConfigs(options: LayoutOptions): ConsumerDefinition[] {
  return [
    {
      stream: STREAMS.tasks.name,
      config: {
        durable_name: CONSUMERS.runners,
        // First events only: each is one task to run.
        filter_subject: FIRST_TASK_EVENTS,
        ack_policy: AckPolicy.Explicit,
        // Made on a store that already has tasks: those were queued on WORK by an older reelay, not here.
        deliver_policy: DeliverPolicy.New,
        // A runner holds a task's first event unacked until the task is final and heartbeats it with `working()`.
        ack_wait: nanos(options.leaseMs),
        max_ack_pending: 100_000,
        max_deliver: -1,
      },
    },
    { ...reactorConsumer(STREAMS.tasks.name, CONSUMERS.taskLogReactors, options.leaseMs), replaces: TASK_LOG_REACTORS_BEFORE },
    reactorConsumer(STREAMS.ledger.name, CONSUMERS.balancesProjector, options.leaseMs),
    reactorConsumer(STREAMS.ledger.name, CONSUMERS.taskChargesProjector, options.leaseMs),
    durableConsumer(STREAMS.webhookJobs.name, CONSUMERS.webhooks, options.leaseMs),
  ];
}

const isNotFound = (error: unknown) =>
  error instanceof JetStreamApiError && (error.code === JetStreamApiCodes.StreamNotFound || error.code === JetStreamApiCodes.ConsumerNotFound);

/**
 * Turns on per-message TTL for a bucket's stream: the edge writes every idempotency claim with its own
 * TTL and the server refuses such writes otherwise. The one setting every start may change on an existing
 * stream: it only adds a capability (a bucket-wide max age set by an older reelay is kept) and can't be undone.
 */
async function allowMessageTtl(jsm: JetStreamManager, stream: string): Promise<void> {
  const { config } = await jsm.streams.info(stream);
  if (!config.allow_msg_ttl) await jsm.streams.update(stream, { ...config, allow_msg_ttl: true });
}

/**
 * Where a consumer that replaces older ones starts: after the last message every one of them acknowledged
 * (what one of them had not handled yet is handled again; read models are idempotent), or from the
 * beginning when none exists (a new store, or one that never had them).
 */
async function startAfterPredecessors(jsm: JetStreamManager, stream: string, predecessors: readonly string[]): Promise<Partial<ConsumerConfig>> {
  const floors: number[] = [];
  for (const durable of predecessors) {
    const info = await jsm.consumers.info(stream, durable).catch((error: unknown) => {
      if (isNotFound(error)) return undefined;
      throw error;
    });
    if (info) floors.push(info.ack_floor.stream_seq);
  }
  if (floors.length === 0) return {};
  return { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.min(...floors) + 1 };
}

/** The backing stream's settings of each bucket and object store, as `planLayoutChanges` compares them. */
export function storeStreams(options: LayoutOptions): Array<{ name: string; config: Partial<StreamConfig> }> {
  return [
    ...Object.values(BUCKETS).map((bucket) => ({
      name: `KV_${bucket}`,
      config: {
        num_replicas: options.replicas,
        ...(BUCKETS_WITH_MESSAGE_TTL.has(bucket) ? { allow_msg_ttl: true } : {}),
      },
    })),
    ...Object.values(OBJECT_STORES).map((store) => ({
      name: `OBJ_${store}`,
      config: { num_replicas: options.replicas, ...(options.videoRetentionMs ? { max_age: nanos(options.videoRetentionMs) } : {}) },
    })),
  ];
}

/** Each durable consumer and the stream it reads (the names only; what metrics and operators look at). */
export const durableConsumers = (): Array<{ stream: string; durable: string }> =>
  consumerConfigs({ replicas: 1, leaseMs: 1 }).map(({ stream, config }) => ({ stream, durable: config.durable_name ?? "" }));

export const streamConfigs = (options: LayoutOptions) => Object.values(STREAMS).map((def) => streamConfig(def, options.replicas));
export { consumerConfigs };

/**
 * Creates what is missing and leaves what exists alone: any process may call it (every service start
 * and CLI command does), so it must never change replicas, ack waits or limits of a running system.
 * Differences are shown and applied only by `reelay infra plan|apply` (layoutPlan.ts).
 */
export async function ensureJetStreamLayout(nc: NatsConnection, jsm: JetStreamManager, options: LayoutOptions): Promise<void> {
  for (const config of streamConfigs(options)) {
    await jsm.streams.info(config.name).catch(async (error: unknown) => {
      if (!isNotFound(error)) throw error;
      await jsm.streams.add(config);
    });
  }
  const kvm = new Kvm(nc);
  // kv and obj `create` make a missing store and open an existing one as it is.
  for (const bucket of Object.values(BUCKETS)) {
    await kvm.create(bucket, { history: 1, replicas: options.replicas });
    if (BUCKETS_WITH_MESSAGE_TTL.has(bucket)) await allowMessageTtl(jsm, `KV_${bucket}`);
  }
  // Each object (its chunks and its entry) ages out `videoRetentionMs` after it was stored.
  await new Objm(nc).create(OBJECT_STORES.videos, { replicas: options.replicas, ...(options.videoRetentionMs ? { ttl: nanos(options.videoRetentionMs) } : {}) });
  for (const { stream, config, replaces } of consumerConfigs(options)) {
    await jsm.consumers.info(stream, config.durable_name ?? "").catch(async (error: unknown) => {
      if (!isNotFound(error)) throw error;
      await jsm.consumers.add(stream, { ...config, ...(await startAfterPredecessors(jsm, stream, replaces ?? [])) });
    });
  }
}
