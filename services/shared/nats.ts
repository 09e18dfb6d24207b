import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { NatsCredentials } from "../../infra/natsCredentials.ts";
import { BUCKETS, ensureJetStreamLayout, OBJECT_STORES, type LayoutOptions } from "../../infra/jetstreamLayout.ts";
import { skipErrorsForSettledRequests } from "./natsSettledRequests.ts";
import { coalesceWrites } from "./natsWriteCoalescing.ts";
import { assertSupportedServer } from "./serverCheck.ts";

/** One connection and the JetStream handles every service shares. */
export interface Nats {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  apiKeys: KV;
  taskViews: KV;
  balances: KV;
  taskCharges: KV;
  ledgerSnapshots: KV;
  idempotency: KV;
  webhookSecrets: KV;
  accountTasks: KV;
  adminTokens: KV;
  taskStats: KV;
  secrets: KV;
  referenceUsage: KV;
  videos: ObjectStore;
  references: ObjectStore;
}

/** Connects; with `layout`, first creates or updates every stream, bucket and consumer. */
export async function connectNats(url: string, name: string, layout?: LayoutOptions, credentials?: NatsCredentials): Promise<Nats> {
  // noAsyncTraces: the client would otherwise build a stack-traced Error for every request (~10% of CPU);
  // and it builds another one as every request ends, unless told not to.
  skipErrorsForSettledRequests();
  const auth = credentials ? { user: credentials.user, pass: credentials.password } : {};
  const nc = await connect({ servers: url.split(","), name, maxReconnectAttempts: -1, noAsyncTraces: true, ...auth });
  try {
    assertSupportedServer(nc, url);
  } catch (error) {
    await nc.close();
    throw error;
  }
  coalesceWrites(nc);
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  if (layout) await ensureJetStreamLayout(nc, jsm, layout);
  const kvm = new Kvm(js);
  return {
    nc,
    js,
    jsm,
    apiKeys: await kvm.open(BUCKETS.apiKeys),
    taskViews: await kvm.open(BUCKETS.taskViews),
    balances: await kvm.open(BUCKETS.balances),
    taskCharges: await kvm.open(BUCKETS.taskCharges),
    ledgerSnapshots: await kvm.open(BUCKETS.ledgerSnapshots),
    idempotency: await kvm.open(BUCKETS.idempotency),
    webhookSecrets: await kvm.open(BUCKETS.webhookSecrets),
    accountTasks: await kvm.open(BUCKETS.accountTasks),
    adminTokens: await kvm.open(BUCKETS.adminTokens),
    taskStats: await kvm.open(BUCKETS.taskStats),
    secrets: await kvm.open(BUCKETS.secrets),
    referenceUsage: await kvm.open(BUCKETS.referenceUsage),
    videos: await new Objm(js).open(OBJECT_STORES.videos),
    references: await new Objm(js).open(OBJECT_STORES.references),
  };
}
