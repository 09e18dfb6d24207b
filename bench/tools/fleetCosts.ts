/**
 * What the fleet's shared limits cost (issue 35): `node --import tsx bench/tools/fleetCosts.ts [tasks] [requests]`.
 * Starts nats-server and, in this process, (1) the same tasks with the budget off (no channel pool: the baseline),
 * then 1 and 3 runners' channel pools sharing a channel of maxInFlight 64 or 8 and submitsPerSecond 0 (no
 * spacing wait) or 2,000: each task takes a slot, takes its submit turn and gives the slot back, as a task's life
 * does (a runner's block is refreshed once per third of a lease however many tasks it serves);
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
const provider = (maxInFlight: number, submitsPerSecond: number): VideoProvider => ({
  policy: { pollFirstAfterMs: 0, pollEveryMs: 10, pollMaxEveryMs: 10, maxInFlight, submitsPerSecond, timeoutMs: 1000 },
  submit: () => Promise.reject(new Error("not called")),
  status: () => Promise.reject(new Error("not called")),
  close: () => Promise.resolve(),
});

/** The budget-off run's messages and CPU per task, subtracted from the pools' runs. */
let baseline: { messages: number; cpu: number } | undefined;

async function measure(what: string, count: number, run: () => Promise<number | void>): Promise<{ messages: number; cpu: number }> {
  const before = await varz(server.url);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const passed = (await run()) ?? count;
  const elapsed = performance.now() - started;
  const used = process.cpuUsage(cpuBefore);
  const delta = varzDelta(before, await varz(server.url));
  const messages = (delta.in_msgs + delta.out_msgs) / count;
  const cpu = (used.user + used.system) / count;
  const above = baseline === undefined || what.startsWith("request") ? "" : ` (above budget off: ${(messages - baseline.messages).toFixed(2)} messages, ${(cpu - baseline.cpu).toFixed(0)} µs CPU)`;
  process.stdout.write(`${what}: ${messages.toFixed(2)} NATS messages (server in+out), ${cpu.toFixed(0)} µs CPU, ${((elapsed * 1000) / count).toFixed(0)} µs wall each${above}`);
  process.stdout.write(passed === count ? "\n" : `; ${passed} of ${count} passed: ${((messages * count) / passed).toFixed(2)} messages per request let through\n`);
  return { messages, cpu };
}

const connections: Nats[] = [];
const connection = async (name: string) => {
  const nats = await connectNats(server.url, name, { replicas: 1, leaseMs: 30_000 });
  connections.push(nats);
  return nats;
};

// The budget off: the same 16 tasks at a time per runner, each awaiting where it would take a slot and a turn, and holding it across I/O.
baseline = await measure("task, budget off (no channel pool), 1 runner", tasks, async () => {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < tasks) {
        next++;
        await Promise.resolve();
        await Promise.resolve();
        await new Promise(setImmediate);
      }
    }),
  );
});

for (const [runners, max, rate] of [[1, 64, 0], [3, 64, 0], [1, 64, 2000], [3, 64, 2000], [3, 8, 0]] as const) {
  const channel = `costs-${runners}-${max}-${rate}`;
  const pools = await Promise.all(
    Array.from({ length: runners }, async (_, i) => {
      const pool = new ChannelPool(new Map([[channel, { kind: "bench", provider: provider(max, rate), weight: 1, coolDownMs: 60_000 }]]), { store: (await connection(`runner-${i}`)).fleet, runner: `runner-${i}`, leaseMs: 30_000 }, log);
      await pool.start();
      return pool;
    }),
  );
  const served = pools.map(() => 0);
  await measure(`task (slot, submit turn, release), ${runners} runner(s), maxInFlight ${max}, submitsPerSecond ${rate}`, tasks, async () => {
    let next = 0;
    // 16 tasks at once per runner: against 8 slots most of them wait for a slot, as under load.
    await Promise.all(
      pools.flatMap((pool, i) =>
        Array.from({ length: 16 }, async () => {
          while (next < tasks) {
            next++;
            const lease = await pool.acquire(`account-${next % 5}`, [channel], never);
            await lease.submitTurn(never);
            // A real task holds its slot across I/O: without this, one runner's tasks would run in microtasks only and starve the others.
            await new Promise(setImmediate);
            lease.release();
            served[i] = (served[i] ?? 0) + 1;
          }
        }),
      ),
    );
  });
  if (runners > 1) process.stdout.write(`  tasks served per runner: ${served.join(", ")}\n`);
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
