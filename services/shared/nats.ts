import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { NatsCredentials } from "../../infra/natsCredentials.ts";
import { BUCKETS, ensureJetStreamLayout, OBJECT_STORES, type LayoutOptions } from "../../infra/jetstreamLayout.ts";
import { environment } from "./environment.ts";
import { FleetStore } from "./fleetStore.ts";
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
  ledgerSnapshots: KV;
  idempotency: KV;
  webhookSecrets: KV;
  adminTokens: KV;
  taskStats: KV;
  secrets: KV;
  referenceUsage: KV;
  /** The fleet's shared limits and channel state (bucket `fleet`, contracts/fleet.ts). */
  fleet: FleetStore;
  videos: ObjectStore;
  references: ObjectStore;
}

/**
 * Connects; with `layout`, first creates or updates every stream, bucket and consumer.
 *
 * Two methods of the pinned client are replaced (each guarded: if its shape changes, nothing is replaced and a
 * test fails): writes once per event-loop turn (natsWriteCoalescing.ts) and no Error built as each request ends
 * (natsSettledRequests.ts). Each stays only while `npm run bench -- --only patches` shows it pays
 * (docs/decisions.md); REELAY_NATS_PATCHES switches them off for that comparison.
 */
export async function connectNats(url: string, name: string, layout?: LayoutOptions, credentials?: NatsCredentials): Promise<Nats> {
  const { REELAY_NATS_PATCHES: patches } = environment();
  // noAsyncTraces: the client would otherwise build a stack-traced Error for every request (~10% of CPU);
  // and it builds another one as every request ends, unless told not to.
  if (patches === "both" || patches === "settled-requests") skipErrorsForSettledRequests();
  const auth = credentials ? { user: credentials.user, pass: credentials.password } : {};
  // Back within a quarter second of the server (the client's default waits 2 s between tries of a server): a
  // runner's first heartbeat after a restart must reach the server before its held jobs' leases run out (5 s
  // leases were lost with 2 s waits, issue 34; test/fleet/runnersThroughServerRestart.fleet.spec.ts).
  const nc = await connect({ servers: url.split(","), name, maxReconnectAttempts: -1, reconnectTimeWait: 250, noAsyncTraces: true, ...auth });
  try {
    assertSupportedServer(nc, url);
  } catch (error) {
    await nc.close();
    throw error;
  }
  if (patches === "both" || patches === "coalesce-writes") coalesceWrites(nc);
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  if (layout) await ensureJetStreamLayout(nc, jsm, layout);
  const kvm = new Kvm(js);
  // Every bucket's stream allows direct gets (the layout makes them so); a bound bucket does not know it unless
  // told, and its gets would go through the JetStream API instead: slower, and each one an advisory message.
  const bucket = (name: string) => kvm.open(name, { allow_direct: true });
  return {
    nc,
    js,
    jsm,
    apiKeys: await bucket(BUCKETS.apiKeys),
    taskViews: await bucket(BUCKETS.taskViews),
    balances: await bucket(BUCKETS.balances),
    ledgerSnapshots: await bucket(BUCKETS.ledgerSnapshots),
    idempotency: await bucket(BUCKETS.idempotency),
    webhookSecrets: await bucket(BUCKETS.webhookSecrets),
    adminTokens: await bucket(BUCKETS.adminTokens),
    taskStats: await bucket(BUCKETS.taskStats),
    secrets: await bucket(BUCKETS.secrets),
    referenceUsage: await bucket(BUCKETS.referenceUsage),
    fleet: new FleetStore(js, await bucket(BUCKETS.fleet)),
    videos: await new Objm(js).open(OBJECT_STORES.videos),
    references: await new Objm(js).open(OBJECT_STORES.references),
  };
}
