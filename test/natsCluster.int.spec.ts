import { jetstream } from "@nats-io/jetstream";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { freeLoopbackPort } from "../infra/natsServer.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";

const CLUSTER_CONFIGS = [1, 2, 3].map((n) => new URL(`../infra/nats/cluster/node${n}.conf`, import.meta.url).pathname);

/**
 * The shipped 3-node cluster configs, started on the server the run uses. Only what must differ on one
 * test machine changes: loopback ports (command line) and temporary stores (the config names a store_dir,
 * which nats-server refuses to have overridden by -sd, so each node gets a copy pointing elsewhere).
 */
async function startCluster(dir: string): Promise<{ urls: string[]; nodes: ChildProcess[] }> {
  const clientPorts = [await freeLoopbackPort(), await freeLoopbackPort(), await freeLoopbackPort()];
  const routePorts = [await freeLoopbackPort(), await freeLoopbackPort(), await freeLoopbackPort()];
  const routes = routePorts.map((port) => `nats://127.0.0.1:${port}`).join(",");
  const nodes = CLUSTER_CONFIGS.map((shipped, i) => {
    const config = join(dir, `node${i + 1}.conf`);
    writeFileSync(config, readFileSync(shipped, "utf8").replace(/store_dir: ".*"/, `store_dir: "${join(dir, `node${i + 1}`)}"`));
    return spawn(
      process.env.NATS_SERVER_BIN ?? "nats-server",
      ["-c", config, "-a", "127.0.0.1", "-p", String(clientPorts[i]), "--cluster", `nats://127.0.0.1:${routePorts[i]}`, "--routes", routes],
      { stdio: "ignore" },
    );
  });
  return { urls: clientPorts.map((port) => `nats://127.0.0.1:${port}`), nodes };
}

describe("the 3-node cluster in infra/nats/cluster", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-cluster-"));
  let nodes: ChildProcess[] = [];
  let nats: Nats | undefined;
  afterAll(async () => {
    await nats?.nc.close();
    // Wait for the nodes to exit: removing the store while one still writes fails (ENOTEMPTY) on a busy machine.
    await Promise.all(
      nodes.map(
        (node) =>
          new Promise<void>((resolve) => {
            if (node.exitCode !== null || node.signalCode !== null) return resolve();
            const timer = setTimeout(() => node.kill("SIGKILL"), 5000);
            node.once("exit", () => {
              clearTimeout(timer);
              resolve();
            });
            node.kill("SIGTERM");
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 });
  });

  it("starts, takes reelay's layout with 3 replicas, and keeps guarded writes across nodes", async () => {
    const cluster = await startCluster(dir);
    nodes = cluster.nodes;
    // JetStream needs a meta leader before the layout can be made: retry connecting until the cluster formed.
    await expect
      .poll(
        async () => {
          nats ??= await connectNats(cluster.urls.join(","), "cluster-test", { replicas: 3, leaseMs: 5_000 }).catch(() => undefined);
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
    const careless = await connectNats(cluster.urls.join(","), "cluster-test-r1", { replicas: 1, leaseMs: 1_000 });
    await careless.nc.close();
    expect((await nats.jsm.streams.info(STREAMS.events.name)).config.num_replicas).toBe(3);

    const js = jetstream(nats.nc);
    const first = await js.publish("acct.cluster-acct.money.ledger", "{}", { expect: { lastSubjectSequence: 0 } });
    await expect(js.publish("acct.cluster-acct.money.ledger", "{}", { expect: { lastSubjectSequence: 0 } })).rejects.toThrow(/wrong last sequence/);
    await js.publish("acct.cluster-acct.money.ledger", "{}", { expect: { lastSubjectSequence: first.seq } });
  });
});
