import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freeLoopbackPort } from "../../infra/natsServer.ts";

const CLUSTER_CONFIGS = [1, 2, 3].map((n) => new URL(`../../infra/nats/cluster/node${n}.conf`, import.meta.url).pathname);

export interface TestCluster {
  /** Each node's client URL, node 1 first. */
  urls: string[];
  nodes: ChildProcess[];
  /** The `server_name` of each node (`reelay-1` …), as JetStream names leaders. */
  names: string[];
  /** Stops every node still running and waits for each to exit. */
  stop(): Promise<void>;
}

/**
 * The shipped 3-node cluster configs, started on the server the run uses. Only what must differ on one
 * test machine changes: loopback ports (command line) and temporary stores (the config names a store_dir,
 * which nats-server refuses to have overridden by -sd, so each node gets a copy pointing elsewhere).
 * The ports are picked ahead (each node's routes name the others'), so another test's server may take one
 * first: a node counts as started only once it wrote its ports file (it listens on all of them), and a node
 * that exits instead sends the whole cluster to other ports.
 */
export async function startCluster(dir: string): Promise<TestCluster> {
  for (let attempt = 1; ; attempt++) {
    const portsDir = join(dir, `ports-${attempt}`);
    const cluster = await spawnCluster(dir, attempt, portsDir);
    if (await listening(cluster.nodes, portsDir)) return cluster;
    await cluster.stop();
    if (attempt >= 5) throw new Error("the 3-node cluster did not start: on each of 5 attempts a node exited (a port taken) or was not listening within 30 s");
  }
}

/** The cluster on ports picked now, each node writing its ports file into `portsDir` once it listens. */
async function spawnCluster(dir: string, attempt: number, portsDir: string): Promise<TestCluster> {
  const clientPorts = [await freeLoopbackPort(), await freeLoopbackPort(), await freeLoopbackPort()];
  const routePorts = [await freeLoopbackPort(), await freeLoopbackPort(), await freeLoopbackPort()];
  const routes = routePorts.map((port) => `nats://127.0.0.1:${port}`).join(",");
  mkdirSync(portsDir, { recursive: true });
  const nodes = CLUSTER_CONFIGS.map((shipped, i) => {
    const config = join(dir, `node${i + 1}.conf`);
    // A store of its own per attempt: nothing a node of a failed attempt wrote is read by the next.
    writeFileSync(config, readFileSync(shipped, "utf8").replace(/store_dir: ".*"/, `store_dir: "${join(dir, `node${i + 1}-${attempt}`)}"`));
    return spawn(
      process.env.NATS_SERVER_BIN ?? "nats-server",
      ["-c", config, "-a", "127.0.0.1", "-p", String(clientPorts[i]), "--cluster", `nats://127.0.0.1:${routePorts[i]}`, "--routes", routes, "--ports_file_dir", portsDir],
      { stdio: "ignore" },
    );
  });
  return {
    urls: clientPorts.map((port) => `nats://127.0.0.1:${port}`),
    nodes,
    names: CLUSTER_CONFIGS.map((_, i) => `reelay-${i + 1}`),
    // Waits for the nodes to exit: removing the store while one still writes fails (ENOTEMPTY) on a busy machine.
    stop: () =>
      Promise.all(
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
      ).then(() => undefined),
  };
}

/** Whether every node listens on its ports (each wrote its ports file) before any exits; 30 s at most. */
async function listening(nodes: ChildProcess[], portsDir: string): Promise<boolean> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (nodes.some((node) => node.exitCode !== null || node.signalCode !== null)) return false;
    const written = readdirSync(portsDir);
    if (nodes.every((node) => written.some((name) => name.endsWith(`_${node.pid ?? -1}.ports`)))) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}
