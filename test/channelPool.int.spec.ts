import { setMaxListeners } from "node:events";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BlocksRecord, SubmitsRecord, type Block } from "../contracts/fleet.ts";
import { fleetChannelReports } from "../services/shared/channelReports.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { ChannelPool, type ChannelLease } from "../services/runner/policy/channelPool.ts";
import type { VideoProvider } from "../services/runner/providers/types.ts";
import { startTestNats } from "./helpers/testNats.ts";

const log = pino({ level: "silent" });
const LEASE_MS = 1_500;
const provider = (maxInFlight: number, submitsPerSecond = 0): VideoProvider => ({
  policy: { pollFirstAfterMs: 0, pollEveryMs: 10, pollMaxEveryMs: 10, maxInFlight, submitsPerSecond, timeoutMs: 1000 },
  submit: () => Promise.reject(new Error("not called")),
  status: () => Promise.reject(new Error("not called")),
  close: () => Promise.resolve(),
});
/** The signal of tasks that never give up: shared by the many waiting at once here (each task has its own in a runner). */
const never = new AbortController().signal;
setMaxListeners(100, never);

/**
 * The channel pool of several runners sharing one fleet state (bucket `fleet`) on a real nats-server: the
 * limits, turns and cool-downs hold for the fleet, not per runner. Each test uses channel names of its own.
 */
describe("channel pools of several runners share one budget per channel", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  const pools: ChannelPool[] = [];
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "channel-pool", { replicas: 1, leaseMs: LEASE_MS });
  });
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.close()));
    await nats.nc.close();
    await server.stop();
  });

  const runner = async (name: string, channels: Record<string, VideoProvider>, coolDownMs = 60_000, logger = log): Promise<ChannelPool> => {
    const settings = new Map(Object.entries(channels).map(([channel, p]) => [channel, { kind: "test", provider: p, weight: 1, coolDownMs }]));
    const pool = new ChannelPool(settings, { store: nats.fleet, runner: name, leaseMs: LEASE_MS }, logger, () => 0);
    await pool.start();
    pools.push(pool);
    return pool;
  };
  const report = async (channel: string) => (await fleetChannelReports(nats)).find((row) => row.channel === channel);

  it("given three runners and a channel of maxInFlight 2, when 12 tasks ask for it, then never more than 2 hold it and all are served", async () => {
    const runners = await Promise.all(["r1", "r2", "r3"].map((name) => runner(name, { shared: provider(2) })));
    let holding = 0;
    let peak = 0;
    const served = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const lease = await (runners[i % 3] as ChannelPool).acquire(`acct-${i % 4}`, ["shared"], never);
        peak = Math.max(peak, ++holding);
        await new Promise((resolve) => setTimeout(resolve, 20));
        holding--;
        lease.release();
        return lease.channel;
      }),
    );
    expect(served).toEqual(Array(12).fill("shared"));
    expect(peak).toBeLessThanOrEqual(2);
    expect((await report("shared"))?.maxInFlight).toBe(2);
  });

  it("given one account's burst waiting on one runner, when another account's task waits on another runner, then it takes the next free slot", async () => {
    const [busy, quiet] = await Promise.all([runner("busy", { turns: provider(1) }), runner("quiet", { turns: provider(1) })]);
    const first = await busy.acquire("burst", ["turns"], never);
    const order: string[] = [];
    const burst = [1, 2, 3].map((n) => busy.acquire("burst", ["turns"], never).then((lease) => (order.push(`burst-${n}`), lease)));
    await expect.poll(async () => (await report("turns"))?.waitingByAccount, { timeout: 5_000 }).toEqual({ burst: 3 });
    const small = quiet.acquire("small", ["turns"], never).then((lease) => (order.push("small"), lease));
    await expect.poll(async () => (await report("turns"))?.waiting, { timeout: 5_000 }).toBe(4);
    first.release();
    (await small).release();
    for (const lease of burst) (await lease).release();
    expect(order[0]).toBe("small");
  });

  it("given a slot freed while the pool is writing its waiting notice, then the waiting task gets it as that write ends, not at the next beat", async () => {
    // A long lease: the next beat (which would find the task anyway) is a second away.
    let noticeStarted: () => void = () => undefined;
    const noticeWriting = new Promise<void>((resolve) => (noticeStarted = resolve));
    const slowNotices = Object.create(nats.fleet) as typeof nats.fleet;
    slowNotices.write = async (key, value, options) => {
      if (key.includes(".wait.")) {
        noticeStarted();
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      return nats.fleet.write(key, value, options);
    };
    const settings = new Map([["wake", { kind: "test", provider: provider(1), weight: 1, coolDownMs: 60_000 }]]);
    const pool = new ChannelPool(settings, { store: slowNotices, runner: "waker", leaseMs: 30_000 }, log, () => 0);
    await pool.start();
    pools.push(pool);
    const holder = await pool.acquire("a", ["wake"], never);
    const askedAt = performance.now();
    const next = pool.acquire("b", ["wake"], never);
    await noticeWriting;
    holder.release();
    (await next).release();
    expect(performance.now() - askedAt).toBeLessThan(700);
  });

  it("an abandoned wait leaves the queue; a release twice frees one slot", async () => {
    const pool = await runner("abandon", { once: provider(1) });
    const lease = await pool.acquire("a", ["once"], never);
    const aborter = new AbortController();
    const abandoned = pool.acquire("b", ["once"], aborter.signal);
    aborter.abort(new Error("deadline"));
    await expect(abandoned).rejects.toThrow("deadline");
    lease.release();
    lease.release();
    // Had the abandoned wait stayed in the queue, it would hold the freed slot now.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(pool.slotsHeld()).toBe(0);
    await expect.poll(async () => (await report("once"))?.inFlight, { timeout: 5_000 }).toBe(0);
  });

  it("given a block held by a runner that stops refreshing it (dead), then another runner gets its slot one lease later", async () => {
    const dead = await runner("dead", { orphan: provider(1) });
    await dead.acquire("a", ["orphan"], never);
    // The process dies: no release, no refresh (its timer stops with it).
    (dead as unknown as { tick: NodeJS.Timeout }).tick.close();
    const alive = await runner("alive", { orphan: provider(1) });
    const started = Date.now();
    const lease: ChannelLease = await alive.acquire("b", ["orphan"], never);
    expect(lease.channel).toBe("orphan");
    expect(Date.now() - started).toBeLessThan(LEASE_MS + 1_200);
  });

  const blocksOf = async (channel: string): Promise<Record<string, Block>> => {
    const record = BlocksRecord.safeParse((await nats.fleet.read(`chan.${channel}.blocks`)).value);
    return record.success ? Object.fromEntries(Object.entries(record.data.blocks).filter(([, block]) => block.until > Date.now())) : {};
  };

  it("given a channel of maxInFlight 64, when 16 tasks of one runner hold it, then its block grew in steps of 8 to 16 and reports them; unused for a lease, it is given back", async () => {
    const pool = await runner("grower", { wide: provider(64) });
    const leases = await Promise.all(Array.from({ length: 16 }, (_, i) => pool.acquire(`acct-${i % 2}`, ["wide"], never)));
    expect((await blocksOf("wide"))["grower"]?.size).toBe(16);
    await expect.poll(async () => await report("wide"), { timeout: LEASE_MS }).toMatchObject({ inFlight: 16, inFlightByAccount: { "acct-0": 8, "acct-1": 8 } });
    for (const lease of leases) lease.release();
    await expect.poll(async () => (await blocksOf("wide"))["grower"], { timeout: LEASE_MS * 3 }).toBeUndefined();
    expect((await report("wide"))?.inFlight).toBe(0);
  });

  it("given one runner's block holding a whole channel with one task, when another runner's tasks wait for it, then the room goes to them well within a lease", async () => {
    const [holder, needy] = await Promise.all([runner("holder", { hoard: provider(16) }), runner("needy", { hoard: provider(16) })]);
    const held = await Promise.all(Array.from({ length: 16 }, () => holder.acquire("a", ["hoard"], never)));
    for (const lease of held.slice(1)) lease.release();
    const started = Date.now();
    const taken = await Promise.all(Array.from({ length: 15 }, () => needy.acquire("b", ["hoard"], never)));
    expect(Date.now() - started).toBeLessThan(LEASE_MS / 2);
    expect(taken).toHaveLength(15);
    expect(await blocksOf("hoard")).toMatchObject({ holder: { size: 1 }, needy: { size: 15 } });
  });

  it("given three runners racing 90 tasks for a channel of maxInFlight 10, then the live blocks never sum above 10 nor do more than 10 tasks hold it", async () => {
    const sums: number[] = [];
    const watch = nats.fleet.mirror("chan.race10.blocks", (_, record) => {
      const parsed = BlocksRecord.safeParse(record?.value);
      if (parsed.success) sums.push(Object.values(parsed.data.blocks).reduce((sum, block) => sum + (block.until > Date.now() ? block.size : 0), 0));
    }, log);
    await watch.start();
    const racers = await Promise.all(["ten-a", "ten-b", "ten-c"].map((name) => runner(name, { race10: provider(10) })));
    let holding = 0;
    let peak = 0;
    await Promise.all(
      Array.from({ length: 90 }, async (_, i) => {
        const lease = await (racers[i % 3] as ChannelPool).acquire(`acct-${i % 5}`, ["race10"], never);
        peak = Math.max(peak, ++holding);
        await new Promise((resolve) => setTimeout(resolve, 5));
        holding--;
        lease.release();
      }),
    );
    watch.stop();
    expect(peak).toBeLessThanOrEqual(10);
    expect(sums.length).toBeGreaterThan(3);
    expect(Math.max(...sums)).toBeLessThanOrEqual(10);
  });

  it("given a runner that stalled past its lease while another took its slot, then its next refresh keeps its block within maxInFlight and logs the loss", async () => {
    const lines: Array<{ msg?: string; channel?: string }> = [];
    const recording = pino({ level: "error" }, { write: (line: string) => lines.push(JSON.parse(line) as { msg?: string; channel?: string }) });
    const stalled = await runner("stalled", { lapse: provider(1) }, 60_000, recording);
    const internals = stalled as unknown as { tick: NodeJS.Timeout; beat(): Promise<void> };
    await stalled.acquire("a", ["lapse"], never);
    internals.tick.close();
    const other = await runner("other", { lapse: provider(1) });
    await other.acquire("b", ["lapse"], never);
    // The stalled runner wakes up: its refresh finds the slot taken.
    await internals.beat();
    expect(await blocksOf("lapse")).toMatchObject({ other: { size: 1 }, stalled: { size: 0, inUse: 1 } });
    expect(lines.some((line) => line.channel === "lapse" && line.msg?.startsWith("lost part of this runner's block"))).toBe(true);
  });

  it("a channel sidelined by one runner is out of rotation for every runner; a pinned task still gets it; the avoided channel is the last resort", async () => {
    const [a, b] = await Promise.all([runner("side-a", { bad: provider(5), good: provider(5) }, 1_000), runner("side-b", { bad: provider(5), good: provider(5) }, 1_000)]);
    a.sideline("bad", "HTTP 401 AuthenticationError");
    await expect.poll(() => b.anyInRotation(["bad"]), { timeout: 5_000 }).toBe(false);
    expect(await report("bad")).toMatchObject({ state: "cooling down", coolDownReason: "HTTP 401 AuthenticationError" });
    const good = await b.acquire("x", ["bad", "good"], never);
    expect(good.channel).toBe("good");
    const pinned = await b.acquire("x", ["bad"], never, { pinned: true });
    expect(pinned.channel).toBe("bad");
    // Granted at once, the same holds (each block grew to one slot above, free again once given back).
    good.release();
    pinned.release();
    expect(b.grantNow("x", ["bad", "good"])?.channel).toBe("good");
    expect(b.grantNow("x", ["bad"])).toBeUndefined();
    expect(b.grantNow("x", ["bad"], { pinned: true })?.channel).toBe("bad");
    await expect.poll(() => b.anyInRotation(["bad"]), { timeout: 5_000 }).toBe(true);
    expect((await b.acquire("x", ["bad", "good"], never, { avoid: "bad" })).channel).toBe("good");
    expect((await report("bad"))?.recentErrors.at(-1)?.message).toBe("HTTP 401 AuthenticationError");
  });

  it("given submitsPerSecond 10 on a channel, when two runners submit 8 tasks, then their submit turns are 100 ms apart", async () => {
    const [a, b] = await Promise.all([runner("rate-a", { paced: provider(20, 10) }), runner("rate-b", { paced: provider(20, 10) })]);
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const lease = await (i % 2 === 0 ? a : b).acquire("a", ["paced"], never);
        await lease.submitTurn(never);
        lease.release();
      }),
    );
    // The turns as reserved in the shared record (each submit then sleeps until its turn: a loaded machine may wake it late).
    const { recent } = SubmitsRecord.parse((await nats.fleet.read("chan.paced.submits")).value);
    expect(recent).toHaveLength(8);
    const gaps = recent.slice(1).map((time, i) => time - (recent[i] as number));
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(100);
    expect(Date.now() - started).toBeGreaterThanOrEqual(700);
    expect((await report("paced"))?.submitRate).toBeGreaterThan(0);
  });

  it("given 48 tasks on three runners racing for submit turns, then every one gets its turn (a lost race is tried again, never thrown)", async () => {
    const racers = await Promise.all(["race-a", "race-b", "race-c"].map((name) => runner(name, { racing: provider(48, 2_000) })));
    const turns = await Promise.all(
      Array.from({ length: 48 }, async (_, i) => {
        const lease = await (racers[i % 3] as ChannelPool).acquire("a", ["racing"], never);
        await lease.submitTurn(never);
        lease.release();
        return true;
      }),
    );
    expect(turns).toHaveLength(48);
  });

  it("given a channel with more waiting records than one page of reads (1,100), then the report counts every one", async () => {
    const until = Date.now() + 60_000;
    await Promise.all(Array.from({ length: 1_100 }, (_, n) => nats.fleet.write(`chan.many.wait.r${n}.a`, { channel: "many", runner: `r${n}`, account: "a", count: 1, since: 0, servedAt: 0, until }, { ttlMs: 60_000 })));
    expect((await report("many"))?.waiting).toBe(1_100);
  });

  it("a failed clean-up (deleteAfterCopy) is logged once per runner with its reason and counted for the fleet; the channel stays in rotation", async () => {
    const lines: Array<{ channel?: string; why?: string }> = [];
    const recording = pino({ level: "warn" }, { write: (line: string) => lines.push(JSON.parse(line) as { channel?: string; why?: string }) });
    const pool = await runner("cleanup", { relay: provider(5) }, 60_000, recording);
    const why = "the upstream does not support DELETE /videos/{id}: unsupported operation (HTTP 405): HTTP 405";
    for (let i = 0; i < 3; i++) {
      pool.cleanupFailed("relay", why);
      await expect.poll(async () => (await report("relay"))?.cleanupFailures?.count, { timeout: 5_000 }).toBe(i + 1);
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ channel: "relay", why });
    expect(await report("relay")).toMatchObject({ state: "in rotation", recentErrors: [], cleanupFailures: { count: 3, last: { message: why } } });
  });
  it("given nobody waiting, then grantNow gives a slot at once from the runner's block and grows the block ahead of its tasks; with a task waiting on this runner or another, it leaves the slot to the queue's turns", async () => {
    const here = await runner("now-here", { instant: provider(16) });
    // The block is empty until the queue grew it once (a NATS write): the first slot always comes from the queue.
    expect(here.grantNow("a", ["instant"])).toBeUndefined();
    const first = await here.acquire("a", ["instant"], never);
    // The block grew by 2 (an eighth of 16): the next slot is in it, once the queue's pass has ended.
    const granted: ChannelLease[] = [];
    const grantAtOnce = (account: string) => {
      const lease = here.grantNow(account, ["instant"]);
      if (lease) granted.push(lease);
      return lease?.channel;
    };
    await expect.poll(() => grantAtOnce("b"), { timeout: 5_000 }).toBe("instant");
    // That took the block's last slot: it grows ahead (a write in the background), and the next task is served at once too.
    await expect.poll(() => grantAtOnce("c"), { timeout: 5_000 }).toBe("instant");
    for (const lease of [first, ...granted]) lease.release();

    // A task of this runner waits (the channel is full): no task is served past it.
    const tight = await runner("now-tight", { tight: provider(1) });
    const holder = await tight.acquire("a", ["tight"], never);
    const waiting = tight.acquire("b", ["tight"], never);
    expect(tight.grantNow("c", ["tight"])).toBeUndefined();
    holder.release();
    (await waiting).release();

    // Another runner's task waits for the channel: its turn is weighed, no slot is taken past it.
    await nats.fleet.write("chan.instant.wait.elsewhere.e", { channel: "instant", runner: "elsewhere", account: "e", count: 1, since: Date.now(), servedAt: 0, until: Date.now() + 60_000 }, { ttlMs: 60_000 });
    await expect.poll(() => here.fleet.anyWaitingElsewhere("instant"), { timeout: 5_000 }).toBe(true);
    expect(here.grantNow("f", ["instant"])).toBeUndefined();
  });
});
