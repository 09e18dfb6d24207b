import { hostname } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BlocksRecord } from "../../contracts/fleet.ts";
import { startNatsServer, type RunningNatsServer } from "../../infra/natsServer.ts";
import { AccountLedger } from "../../services/billing/accountLedger.ts";
import { ApiKeyStore } from "../../services/shared/apiKeys.ts";
import { fleetChannelReports } from "../../services/shared/channelReports.ts";
import { connectNats, type Nats } from "../../services/shared/nats.ts";
import { TaskLog } from "../../services/shared/taskLog.ts";
import { ArkUpstream } from "../fakes/arkUpstream.ts";
import { addArk } from "../helpers/arkChannels.ts";
import { killHard, startChildService, writeConfigFile, type ServiceChild } from "../helpers/childService.ts";
import { testConfig } from "../helpers/testApp.ts";
import { VideoClient } from "../helpers/videoClient.ts";

const CHANNEL = "ark-fleet";
const MAX_IN_FLIGHT = 4;
const SUBMITS_PER_SECOND = 5;
const LEASE_MS = 2_000;
const RATE = 20;
const BURST = 10;
const BIG = 56;
const SMALL = 4;
/** Each runner's waiting set: the big burst (56) is far larger than all three runners hold (3 × 3 waiting + 4 at the vendor). */
const MAX_WAITING = 3;
const KEY = "ark-fleet-key";

/**
 * The fleet acts as one (issue 35): one nats-server, 2 edges, 3 runners and a projector as separate processes,
 * against a fake Ark account that accepts 4 tasks at once and answers 429 beyond. 60 tasks never put more than
 * `maxInFlight` at the vendor nor submit faster than `submitsPerSecond`; one API key's rate limit holds across
 * both edges; a small account's tasks, created after a big account's burst larger than every runner's waiting
 * set together, finish before most of that burst; a runner killed with SIGKILL gives its slots back within one lease.
 */
describe("a fleet of edges and runners shares one budget per channel and per key", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-fleet-"));
  const ark = new ArkUpstream(KEY);
  const children: ServiceChild[] = [];
  let server: RunningNatsServer;
  let nats: Nats;
  let edges: string[] = [];
  let runners: ServiceChild[] = [];
  const keys = new Map<string, string>();

  beforeAll(async () => {
    process.env.ARK_FLEET_KEY = KEY;
    await ark.start();
    ark.maxConcurrentTasks = MAX_IN_FLIGHT;
    ark.generation = { kind: "succeed", afterMs: 1_000 };
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    const config = testConfig((c) => {
      c.runner.leaseMs = LEASE_MS;
      c.runner.maxWaitingTasks = MAX_WAITING;
      c.limits.requestsPerSecondPerKey = RATE;
      c.limits.burstPerKey = BURST;
      c.limits.submitWaitMs = 200;
      addArk(c, { [CHANNEL]: { baseUrl: ark.baseUrl, apiKeyEnv: "ARK_FLEET_KEY", maxInFlight: MAX_IN_FLIGHT, pollEveryMs: 100 } }, { "Seedance-fleet": { provider: CHANNEL } });
      const entry = c.providers[CHANNEL];
      if (entry && "submitsPerSecond" in entry) entry.submitsPerSecond = SUBMITS_PER_SECOND;
    });
    const configPath = writeConfigFile(config);
    nats = await connectNats(server.url, "fleet-test", { replicas: 1, leaseMs: LEASE_MS });
    const ledger = new AccountLedger(nats);
    for (const account of ["big", "small", "meter"]) {
      await ledger.execute(account, { type: "open" });
      await ledger.execute(account, { type: "credit", amountMicros: 10_000_000_000, creditId: `fleet-${account}` });
      keys.set(account, (await new ApiKeyStore(nats.apiKeys).create(account)).key);
    }
    const env = { NATS_URL: server.url, REELAY_CONFIG: configPath, ARK_FLEET_KEY: KEY };
    const started = await Promise.all([
      ...[1, 2].map(() => startChildService(["edge"], env)),
      ...[1, 2, 3].map(() => startChildService(["runner"], env)),
      startChildService(["projector"], env),
    ]);
    children.push(...started);
    edges = started.slice(0, 2).map((edge) => `http://127.0.0.1:${edge.port}`);
    runners = started.slice(2, 5);
  });
  afterAll(async () => {
    await Promise.all(children.map(killHard));
    await nats?.nc.close().catch(() => undefined);
    await server?.stop();
    await ark.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const client = (account: string, edge: number) => new VideoClient(edges[edge % edges.length] as string, keys.get(account) as string);

  /** A create, sent again after a moment when the key's rate limit answers 429 (as a client library would). */
  const create = async (account: string, edge: number, n: number): Promise<number> => {
    for (;;) {
      const answer = await client(account, edge).create({ model: "Seedance-fleet", prompt: `${account} ${n}`, duration: 5 });
      if (answer.status === 200) return answer.body.data?.task_id as number;
      if (answer.status !== 429) throw new Error(`create answered ${answer.status}: ${JSON.stringify(answer.body)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  /** When the task succeeded (its final event's time), or undefined while it runs. */
  const finishedAt = async (taskLog: TaskLog, account: string, taskId: number): Promise<number | undefined> => {
    const { events } = await taskLog.read(account, taskId);
    const final = events.find((event) => event.type === "GenerationSucceeded" || event.type === "GenerationFailed");
    if (final?.type === "GenerationFailed") throw new Error(`task ${taskId} failed: ${JSON.stringify(final.data)}`);
    return final ? Date.parse(final.meta.at) : undefined;
  };

  /** The runners whose blocks of the channel's slots count now. */
  const heldSlots = async () => {
    const record = BlocksRecord.safeParse((await nats.fleet.read(`chan.${CHANNEL}.blocks`)).value);
    if (!record.success) return [];
    return Object.entries(record.data.blocks)
      .filter(([, block]) => block.size > 0 && block.until > Date.now())
      .map(([runner]) => ({ runner }));
  };

  it("one key's requests across both edges stay within 10% of its rate", async () => {
    const ms = 3_000;
    const end = Date.now() + ms;
    let passed = 0;
    let limited = 0;
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        while (Date.now() < end) {
          const answer = await client("meter", i).query(1);
          if (answer.status === 429) limited++;
          else passed++;
        }
      }),
    );
    const allowed = BURST + (RATE * ms) / 1000;
    console.log(JSON.stringify({ keyRate: { passed, limited, allowed } }));
    expect(limited).toBeGreaterThan(0);
    expect(passed).toBeLessThanOrEqual(allowed * 1.1);
    expect(passed).toBeGreaterThanOrEqual(allowed * 0.9);
  });

  it("60 tasks: never more than maxInFlight at the vendor nor faster than submitsPerSecond; the small account first; a killed runner's slots return within a lease", { timeout: 180_000 }, async () => {
    const taskLog = new TaskLog(nats.js, nats.jsm);
    // The burst arrives as fast as the big account's key may send it, over both edges.
    const big = await Promise.all(Array.from({ length: BIG }, (_, n) => create("big", n, n)));
    const small = await Promise.all(Array.from({ length: SMALL }, (_, n) => create("small", n, n)));
    const smallCreated = Date.now();

    // The small account's tasks: each finishes before most of the big account's burst (most of which still waits).
    const smallDone = await Promise.all(small.map(async (id) => {
      for (;;) {
        const at = await finishedAt(taskLog, "small", id);
        if (at !== undefined) return at;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }));
    expect(Math.max(...smallDone) - smallCreated).toBeLessThan(10_000);

    // A runner holding a slot dies: its slots are free again (and taken by the others) within one lease.
    let victim: ServiceChild | undefined;
    let victimName = "";
    await expect
      .poll(async () => {
        for (const record of await heldSlots()) {
          victim = runners.find((runner) => record.runner.startsWith(`${hostname()}-${runner.pid}-`));
          victimName = record.runner;
          if (victim) return true;
        }
        return false;
      }, { timeout: 10_000, interval: 50 })
      .toBe(true);
    await killHard(victim as ServiceChild);
    const killedAt = Date.now();
    await expect.poll(async () => (await heldSlots()).some((record) => record.runner === victimName), { timeout: LEASE_MS + 2_000, interval: 50 }).toBe(false);
    const returnedAfter = Date.now() - killedAt;
    expect(returnedAfter).toBeLessThanOrEqual(LEASE_MS + 1_000);

    const bigDone = await Promise.all(big.map(async (id) => {
      for (;;) {
        const at = await finishedAt(taskLog, "big", id);
        if (at !== undefined) return at;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }));
    for (const at of smallDone) expect(bigDone.filter((done) => done > at).length).toBeGreaterThan(BIG / 2);

    // The vendor never had more than maxInFlight of our tasks, never refused one for it, and got one create per task.
    expect(ark.inFlightPeak).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    expect(ark.refusedOverConcurrency).toBe(0);
    expect(ark.createTimes).toHaveLength(BIG + SMALL);
    // Submits spaced by the channel's rate: no second of the run saw more than submitsPerSecond of them (+1 for
    // a window's two closed ends).
    const times = ark.createTimes;
    for (let i = 0; i < times.length; i++) {
      const inWindow = times.filter((time) => time >= (times[i] as number) && time < (times[i] as number) + 1000).length;
      expect(inWindow).toBeLessThanOrEqual(SUBMITS_PER_SECOND + 1);
    }
    const report = (await fleetChannelReports(nats)).find((row) => row.channel === CHANNEL);
    expect(report).toMatchObject({ maxInFlight: MAX_IN_FLIGHT, submitsPerSecond: SUBMITS_PER_SECOND, waiting: 0 });
    console.log(JSON.stringify({ fleet: { inFlightPeak: ark.inFlightPeak, slotsBackAfterMs: returnedAfter, smallDoneAfterMs: smallDone.map((at) => at - smallCreated), bigAfterSmall: bigDone.filter((done) => done > Math.max(...smallDone)).length } }));
  });
});
