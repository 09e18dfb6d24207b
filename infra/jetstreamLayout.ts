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
import { MONEY_EVENTS } from "../contracts/ledger.ts";
import { TASK_OPENINGS, TASK_STATE_EVENTS } from "../contracts/videoTask.ts";
import type { ReelayConfig } from "../contracts/config.ts";

/** Every stream, bucket and durable consumer reelay uses, as data. `ensureJetStreamLayout` makes them exist. */
export const STREAMS = {
  /**
   * Every account's money and tasks, under `acct.<account>.` (contracts/ledger.ts, contracts/videoTask.ts,
   * contracts/taskOpening.ts): `acct.A.money.E.task.N` opens task N with its reservation, `acct.A.money.E.ledger`
   * holds A's other money movements (E: the account's money epoch), `acct.A.task.N.state` and
   * `acct.A.task.N.upstream` task N's later events. One stream, so a task's opening can be guarded by the last
   * sequence over the account's money (of its epoch: `acct.A.money.E.>`).
   */
  events: { name: "EVENTS", subjects: ["acct.>"], retention: RetentionPolicy.Limits, allow_direct: true },
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
  /** Each account's writer state every few hundred events (services/billing/accountLedger.ts). */
  ledgerSnapshots: "ledger_snapshots",
  /** Idempotency-Key of a create → the task it made, per account. */
  idempotency: "idempotency",
  /** Each account's webhook signing secret (and the previous one for a day after a rotation). */
  webhookSecrets: "webhook_secrets",
    /** Operators' admin tokens, stored as hashes (contracts/admin.ts). */
  adminTokens: "admin_tokens",
  /** Task counters by status, hour and day/account/model for the admin dashboard and usage (contracts/taskStats.ts). */
  taskStats: "task_stats",
  /** Each account's uploaded references still stored, by name with size and expiry (services/shared/referenceUsage.ts). */
  referenceUsage: "reference_usage",
  /** Keys reelay makes once and keeps: the one stored videos are named with (services/runner/videoNames.ts). */
  secrets: "secrets",
  /** What the fleet shares: channel slots, cool-downs, submit spacing, waiting accounts, key rate budgets (contracts/fleet.ts). */
  fleet: "fleet",
} as const;


/** Buckets whose entries carry their own TTL (per-message TTL, nats-server 2.11+): no bucket-wide max age. */
const BUCKETS_WITH_MESSAGE_TTL: ReadonlySet<string> = new Set([BUCKETS.idempotency, BUCKETS.fleet]);

export const deadLetterSubject = (reader: string): string => `deadletter.${reader.replace(/[^A-Za-z0-9_-]/g, "_")}`;

export const webhookLogSubject = (account: string): string => `webhooklog.${account}`;

export const webhookJobSubject = (taskId: number): string => `webhookjobs.${taskId}`;

/**
 * `videos`: copied results, kept `videos.retentionDays`. `references`: customers' `input_reference` uploads,
 * kept until their task ends. Each has its own max_bytes (discard new: a full store refuses the new object and
 * never drops or blocks anything else), reserved out of JetStream's store, so neither can take the disk the
 * streams of money and tasks write to.
 */
export const OBJECT_STORES = { videos: "videos", references: "references" } as const;

export const CONSUMERS = {
  runners: "runners",
  /**
   * Every reactor on the task log and the ledger, through one delivery of each event
   * (services/projector/eventReactors.ts): the views (`task_views`), the counters (`task_stats`), settlement,
   * the Idempotency-Key index, the webhook jobs, and the ledger's read model (`balances`).
   */
  taskLogReactors: "task_log_reactors",
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
  /** The videos store's max_bytes (config `videos.maxStoreBytes`); absent: unbounded. */
  videoStoreBytes?: number;
  /** The references store's max_bytes (config `videos.referenceStoreBytes`); absent: unbounded. */
  referenceStoreBytes?: number;
  /** How long an uploaded reference may outlive its upload: past its task's deadline, never needed again. */
  referenceLifetimeMs?: number;
}

/** Margin past a task's deadline (create + `maxTaskMs`) before its reference ages out of the store. */
const REFERENCE_MARGIN_MS = 60 * 60_000;

/** The object stores' limits a config asks for. */
export const storeLimitsOf = (config: ReelayConfig): Required<Pick<LayoutOptions, "videoRetentionMs" | "videoStoreBytes" | "referenceStoreBytes" | "referenceLifetimeMs">> => ({
  videoRetentionMs: config.videos.retentionDays * 24 * 60 * 60_000,
  videoStoreBytes: config.videos.maxStoreBytes,
  referenceStoreBytes: config.videos.referenceStoreBytes,
  referenceLifetimeMs: config.limits.maxTaskMs + REFERENCE_MARGIN_MS,
});

/** Each object store's age and size limits (its stream's max_age and max_bytes). */
function objectStoreLimits(options: LayoutOptions): Record<keyof typeof OBJECT_STORES, { maxAgeMs?: number; maxBytes?: number }> {
  const limits = (maxAgeMs: number | undefined, maxBytes: number | undefined) => ({ ...(maxAgeMs ? { maxAgeMs } : {}), ...(maxBytes ? { maxBytes } : {}) });
  return {
    videos: limits(options.videoRetentionMs, options.videoStoreBytes),
    references: limits(options.referenceLifetimeMs, options.referenceStoreBytes),
  };
}

const nanos = (ms: number) => ms * 1_000_000;

/**
 * How long a stream remembers a msgID: a create tried again within it (the same Idempotency-Key, or the same
 * opening after a lost answer) is found by its msgID; later ones by the Idempotency-Key index.
 */
export const DUPLICATE_WINDOW_MS = 2 * 60_000;
/**
 * How long after a message's first write the same message (its msgID) may be written again and surely still be
 * recognised as a repeat: the duplicate window, less a margin for clocks and writes on their way.
 */
export const SURELY_DEDUPLICATED_MS = DUPLICATE_WINDOW_MS - 15_000;

function streamConfig(def: (typeof STREAMS)[keyof typeof STREAMS], replicas: number): Partial<StreamConfig> & { name: string } {
  return {
    name: def.name,
    subjects: [...def.subjects],
    retention: def.retention,
    storage: StorageType.File,
    num_replicas: replicas,
    allow_direct: def.allow_direct,
    duplicate_window: nanos(DUPLICATE_WINDOW_MS),
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
/** A reactor's pin lapses after no pull for this long at least: two of nats.js's shortest pulls. */
const REACTOR_PIN_FLOOR_MS = 2_000;

/**
 * A durable for a batch reactor (services/shared/batchReactor.ts): the whole stream in order, one
 * acknowledgement per batch (`ack_policy: all`), and a pinned-client priority group, so one process reads
 * at a time and acknowledging a batch can never acknowledge another process's messages; when the pinned
 * process stops pulling for `ackWaitMs` (2 s at least), another one is pinned and takes over from the last
 * acknowledgement.
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
      // A reader's pulls last half of this at most (pinKeepingPull), and nats.js pulls for 1 s at least.
      priority_timeout: nanos(Math.max(ackWaitMs, REACTOR_PIN_FLOOR_MS)),
    },
  };
}

interface ConsumerDefinition {
  stream: string;
  config: Partial<ConsumerConfig>;
}

/** A consumer reading only `subjects` of its stream. */
const filtered = (definition: ConsumerDefinition, subjects: readonly string[]): ConsumerDefinition => ({
  ...definition,
  config: { ...definition.config, filter_subjects: [...subjects] },
});

/**
 * The webhook dispatchers' work consumer. Jobs that wait (backing off, their endpoint paused, over their account's
 * share) go back to the server with a delay and stay pending there: a bound on pending jobs would let one account's
 * waiting jobs (20,000 at the bound this had) hold every account's webhooks up for as long as they wait, a day at
 * worst. So none: what a dispatcher takes at once is bounded by its own pulls (`webhooks.maxInFlight`), and how
 * often waiting jobs come back by their delays (services/webhooks/accountTurns.ts).
 */
function webhookConsumer(ackWaitMs: number): ConsumerDefinition {
  const { stream, config } = durableConsumer(STREAMS.webhookJobs.name, CONSUMERS.webhooks, ackWaitMs);
  return { stream, config: { ...config, max_ack_pending: -1 } };
}

function consumerConfigs(options: LayoutOptions): ConsumerDefinition[] {
  return [
    {
      stream: STREAMS.events.name,
      config: {
        durable_name: CONSUMERS.runners,
        // Openings only: each is one task to run.
        filter_subject: TASK_OPENINGS,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        // A runner holds a task's opening unacked until the task is final and heartbeats it with `working()`.
        ack_wait: nanos(options.leaseMs),
        max_ack_pending: 100_000,
        max_deliver: -1,
      },
    },
    // Openings, the ledger's own messages and the tasks' `state` events, each delivered once for all: the whole
    // of EVENTS but the upstream's acceptances, which no reactor needs (contracts/videoTask.ts).
    filtered(reactorConsumer(STREAMS.events.name, CONSUMERS.taskLogReactors, options.leaseMs), [MONEY_EVENTS, TASK_STATE_EVENTS]),
    webhookConsumer(options.leaseMs),
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

/** Streams of reelay before a create was one write (2026-11-26): their tasks and money are not read. */
const EARLIER_STREAMS = ["TASKS", "LEDGER", "WORK"];
/**
 * Consumers of the first one-write layout (2026-11-26), before one consumer fed every reactor: its
 * `task_log_reactors` did not read the ledger's messages, so its position says nothing of theirs.
 */
const EARLIER_CONSUMERS = ["projector_balances", "projector_task_charges"];

/**
 * Filters of durable consumers in layouts before the one in use: a store made with one has its tasks' events
 * where this version does not look. Until 2026-11-27 every later event was on `acct.A.task.N`.
 */
const EARLIER_FILTERS: ReadonlyArray<{ durable: string; filter: string }> = [
  { durable: CONSUMERS.taskLogReactors, filter: "acct.*.task.*" },
  // Until 2026-11-27 an account's money had no epochs: openings on `acct.A.money.task.N`.
  { durable: CONSUMERS.runners, filter: "acct.*.money.task.*" },
];

/** An error naming what to do: a store made by an earlier reelay is not read (reelay is pre-1.0, no migration). */
export class EarlierStoreLayoutError extends Error {}

async function refuseEarlierLayout(jsm: JetStreamManager): Promise<void> {
  /** Whether what `lookup` asks for exists (and, given `holds`, is as an earlier layout made it). */
  const exists = <T>(lookup: Promise<T>, holds: (found: T) => boolean = () => true) =>
    lookup.then(holds, (error: unknown) => {
      if (isNotFound(error)) return false;
      throw error;
    });
  const earlier = [
    ...EARLIER_STREAMS.map((name) => ({ what: `stream ${name}`, present: () => exists(jsm.streams.info(name)) })),
    ...EARLIER_CONSUMERS.map((name) => ({ what: `consumer ${STREAMS.events.name}/${name}`, present: () => exists(jsm.consumers.info(STREAMS.events.name, name)) })),
    ...EARLIER_FILTERS.map(({ durable, filter }) => ({
      what: `consumer ${STREAMS.events.name}/${durable} reading ${filter}`,
      present: () => exists(jsm.consumers.info(STREAMS.events.name, durable), ({ config }) => [...(config.filter_subjects ?? []), config.filter_subject].includes(filter)),
    })),
  ];
  for (const { what, present } of earlier) {
    if (await present()) {
      throw new EarlierStoreLayoutError(
        `this NATS store was made by an earlier reelay (it has ${what}); this version does not read it: ` +
          "start with a new data directory (REELAY_DATA_DIR) or an empty JetStream",
      );
    }
  }
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
    ...Object.entries(objectStoreLimits(options)).map(([store, { maxAgeMs, maxBytes }]) => ({
      name: `OBJ_${store}`,
      config: { num_replicas: options.replicas, ...(maxAgeMs ? { max_age: nanos(maxAgeMs) } : {}), ...(maxBytes ? { max_bytes: maxBytes } : {}) },
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
  await refuseEarlierLayout(jsm);
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
  // Each object (its chunks and its entry) ages out its store's max age after it was stored.
  for (const [store, { maxAgeMs, maxBytes }] of Object.entries(objectStoreLimits(options))) {
    await new Objm(nc).create(store, { replicas: options.replicas, ...(maxAgeMs ? { ttl: nanos(maxAgeMs) } : {}), ...(maxBytes ? { max_bytes: maxBytes } : {}) }).catch((error: unknown) => {
      // The server reserves max_bytes out of its JetStream store: say which setting to lower.
      if (error instanceof JetStreamApiError && /insufficient (storage )?resources/i.test(error.message)) {
        throw new Error(`nats-server cannot reserve ${maxBytes} bytes for object store ${store} (${error.message}): lower videos.maxStoreBytes or videos.referenceStoreBytes, or raise the server's jetstream max_file_store`);
      }
      throw error;
    });
  }
  for (const { stream, config } of consumerConfigs(options)) {
    await jsm.consumers.info(stream, config.durable_name ?? "").catch(async (error: unknown) => {
      if (!isNotFound(error)) throw error;
      await jsm.consumers.add(stream, config);
    });
  }
}
