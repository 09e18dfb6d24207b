/**
 * What the fleet's shared limits cost (issue 35): `node --import tsx bench/tools/fleetCosts.ts [tasks] [requests]`.
 * Starts nats-server and, in this process, (1) 1 and 3 runners' channel pools sharing a channel of maxInFlight 8
 * and submitsPerSecond 0 (no spacing wait) or 2,000: each task takes a slot, takes its submit turn and gives the
 * slot back, as a task's life does (a task living longer than a third of the lease adds one refresh per third);
 * (2) 1 and 4 edges' rate limiters taking requests for one key (4 clients per edge, back to back) at 20/s (a
 * share of one request), 1,000/s (shares of 50) and 100,000/s (shares of 5,000). Prints nats-server's in+out messages and this process's CPU per task / request.
 */
import { setMaxListeners } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { startNatsServer } from "../../infra/natsServer.ts";
import { FleetRateLimiter } from "../../services/edge/rateLimiter.ts";
import { ChannelPool } from "../../services/runner/policy/channelPool.ts";
import type { VideoProvider } from "../../services/runner/providers/types.ts";
import { connectNats, type Nats } from "../../services/shared/nats.ts";
import { varz, varzDelta } from "../lib/natsStats.ts";

const tasks = Number(process.argv[2] ?? 2000);
const requests = Number(process.argv[3] ?? 20000);
const log = pino({ level: "silent" });
const dir = mkdtempSync(join(tmpdir(), "reelay-fleet-costs-"));
const server = await startNatsServer({ storeDir: join(dir, "nats"), say: () => {} });
const never = new AbortController().signal;
// Every task of this tool waits on the same signal (a real task has its own).
setMaxListeners(1_000, never);
const provider = (submitsPerSecond: number): VideoProvider => ({
  policy: { pollFirstAfterMs: 0, pollEveryMs: 10, pollMaxEveryMs: 10, maxInFlight: 8, submitsPerSecond, timeoutMs: 1000 },
  submit: () => Promise.reject(new Error("not called")),
  status: () => Promise.reject(new Error("not called")),
  close: () => Promise.resolve(),
});

async function measure(what: string, count: number, run: () => Promise<number | void>): Promise<void> {
  const before = await varz(server.url);
  const cpu = process.cpuUsage();
  const started = performance.now();
  const passed = (await run()) ?? count;
  const elapsed = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const delta = varzDelta(before, await varz(server.url));
  const messages = (delta.in_msgs + delta.out_msgs) / count;
  process.stdout.write(`${what}: ${messages.toFixed(2)} NATS messages (server in+out), ${(((used.user + used.system) / count)).toFixed(0)} µs CPU, ${((elapsed * 1000) / count).toFixed(0)} µs wall each`);
  process.stdout.write(passed === count ? "\n" : `; ${passed} of ${count} passed: ${((messages * count) / passed).toFixed(2)} messages per request let through\n`);
}

const connections: Nats[] = [];
const connection = async (name: string) => {
  const nats = await connectNats(server.url, name, { replicas: 1, leaseMs: 30_000 });
  connections.push(nats);
  return nats;
};

for (const [runners, rate] of [[1, 0], [3, 0], [3, 2000]] as const) {
  const channel = `costs-${runners}-${rate}`;
  const pools = await Promise.all(
    Array.from({ length: runners }, async (_, i) => {
      const pool = new ChannelPool(new Map([[channel, { kind: "bench", provider: provider(rate), weight: 1, coolDownMs: 60_000 }]]), { store: (await connection(`runner-${i}`)).fleet, runner: `runner-${i}`, leaseMs: 30_000 }, log);
      await pool.start();
      return pool;
    }),
  );
  await measure(`task (slot, submit turn, release), ${runners} runner(s), submitsPerSecond ${rate}`, tasks, async () => {
    let next = 0;
    // 16 tasks at once per runner against 8 slots: half of them wait for a slot, as under load.
    await Promise.all(
      pools.flatMap((pool, i) =>
        Array.from({ length: 16 }, async () => {
          while (next < tasks) {
            next++;
            const lease = await pool.acquire(`account-${next % 5}`, [channel], never);
            await lease.submitTurn(never);
            lease.release();
          }
          void i;
        }),
      ),
    );
  });
  await Promise.all(pools.map((pool) => pool.close()));
}

for (const [edges, rate] of [[1, 20], [4, 20], [1, 1_000], [4, 1_000], [1, 100_000], [4, 100_000]] as const) {
  const limiters = await Promise.all(Array.from({ length: edges }, async (_, i) => new FleetRateLimiter(rate, rate, (await connection(`edge-${rate}-${i}`)).fleet, log)));
  const count = rate === 20 ? 200 : rate === 1_000 ? 2_000 : requests;
  let passed = 0;
  await measure(`request, ${edges} edge(s), ${rate}/s per key`, count, async () => {
    let sent = 0;
    await Promise.all(
      limiters.flatMap((limiter) =>
        Array.from({ length: 4 }, async () => {
          while (sent < count) {
            sent++;
            try {
              await limiter.take(`key-${edges}-${rate}`);
              passed++;
            } catch {
              await new Promise((resolve) => setTimeout(resolve, 5));
            }
          }
        }),
      ),
    );
    return passed;
  });
}

await Promise.all(connections.map((nats) => nats.nc.close()));
await server.stop();
rmSync(dir, { recursive: true, force: true });
