import { jetstream } from "@nats-io/jetstream";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { startCluster, type TestCluster } from "./helpers/natsCluster.ts";

describe("the 3-node cluster in infra/nats/cluster", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-cluster-"));
  let cluster: TestCluster | undefined;
  let nats: Nats | undefined;
  afterAll(async () => {
    await nats?.nc.close();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 });
  });

  it("starts, takes reelay's layout with 3 replicas, and keeps guarded writes across nodes", async () => {
    cluster = await startCluster(dir);
    const { urls } = cluster;
    // JetStream needs a meta leader before the layout can be made: retry connecting until the cluster formed.
    await expect
      .poll(
        async () => {
          nats ??= await connectNats(urls.join(","), "cluster-test", { replicas: 3, leaseMs: 5_000 }).catch(() => undefined);
          return nats !== undefined;
        },
        { timeout: 30_000, interval: 500 },
      )
      .toBe(true);
    if (!nats) throw new Error("no cluster");
    const ledger = await nats.jsm.streams.info(STREAMS.events.name);
    expect(ledger.config.num_replicas).toBe(3);
    expect(ledger.cluster?.replicas).toHaveLength(2);

    // A process that asks for 1 replica (REELAY_REPLICAS unset) must not scale the cluster's streams down.
    const careless = await connectNats(urls.join(","), "cluster-test-r1", { replicas: 1, leaseMs: 1_000 });
    await careless.nc.close();
    expect((await nats.jsm.streams.info(STREAMS.events.name)).config.num_replicas).toBe(3);

    const js = jetstream(nats.nc);
    const first = await js.publish("acct.cluster-acct.money.ledger", "{}", { expect: { lastSubjectSequence: 0 } });
    await expect(js.publish("acct.cluster-acct.money.ledger", "{}", { expect: { lastSubjectSequence: 0 } })).rejects.toThrow(/wrong last sequence/);
    await js.publish("acct.cluster-acct.money.ledger", "{}", { expect: { lastSubjectSequence: first.seq } });
  });
});
