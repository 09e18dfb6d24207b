import fc from "fast-check";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ChannelPool, type ChannelLease } from "../services/runner/policy/channelPool.ts";
import type { VideoProvider } from "../services/runner/providers/types.ts";

const log = pino({ level: "silent" });
const provider = (maxInFlight: number): VideoProvider => ({
  policy: { pollFirstAfterMs: 0, pollEveryMs: 10, pollMaxEveryMs: 10, maxInFlight, submitsPerSecond: 0, timeoutMs: 1000 },
  submit: () => Promise.reject(new Error("not called")),
  status: () => Promise.reject(new Error("not called")),
  close: () => Promise.resolve(),
});
const poolOf = (limits: Record<string, number>, coolDownMs = 60_000, random = Math.random) =>
  new ChannelPool(new Map(Object.entries(limits).map(([name, max]) => [name, { kind: "test", provider: provider(max), weight: 1, coolDownMs }])), log, random);
const never = new AbortController().signal;

/** The runner's channel pool: limits, turns by account, cool-downs. */
describe("channel pool", () => {
  it("never has more tasks on a channel than its maxInFlight, and grants every waiter once slots free", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom("a", "b", "c"), fc.boolean()), { minLength: 1, maxLength: 40 }), async (requests) => {
        const pool = poolOf({ one: 1, two: 2 });
        const held: ChannelLease[] = [];
        const granted = requests.map(([account, both]) =>
          pool.acquire(account, both ? ["one", "two"] : ["two"], never).then((lease) => {
            held.push(lease);
            return lease;
          }),
        );
        for (let served = 0; served < requests.length; served++) {
          await new Promise((resolve) => setImmediate(resolve));
          for (const row of pool.report()) expect(row.inFlight).toBeLessThanOrEqual(row.maxInFlight);
          held.shift()?.release();
        }
        expect((await Promise.all(granted)).length).toBe(requests.length);
        pool.close();
      }),
      { numRuns: 50 },
    );
  });

  it("serves waiting accounts in turn: a burst does not starve another account's task", async () => {
    const pool = poolOf({ only: 1 });
    const granted: Array<{ who: string; lease: ChannelLease }> = [];
    const wait = (account: string, who: string) => void pool.acquire(account, ["only"], never).then((lease) => granted.push({ who, lease }));
    let current = await pool.acquire("burst", ["only"], never);
    for (const n of [1, 2, 3, 4]) wait("burst", `burst-${n}`);
    wait("other", "other");
    for (let served = 0; served < 5; served++) {
      current.release();
      await new Promise((resolve) => setImmediate(resolve));
      current = granted[served]?.lease ?? current;
    }
    // Waiting accounts take turns: the burst's next task, then the other account's, then the rest of the burst.
    expect(granted.map((grant) => grant.who)).toEqual(["burst-1", "other", "burst-2", "burst-3", "burst-4"]);
    pool.close();
  });

  it("an abandoned wait leaves the queue; a release twice frees one slot", async () => {
    const pool = poolOf({ only: 1 });
    const lease = await pool.acquire("a", ["only"], never);
    const aborter = new AbortController();
    const abandoned = pool.acquire("b", ["only"], aborter.signal);
    aborter.abort(new Error("deadline"));
    await expect(abandoned).rejects.toThrow("deadline");
    expect(pool.report()[0]?.waiting).toBe(0);
    lease.release();
    lease.release();
    expect(pool.report()[0]?.inFlight).toBe(0);
    pool.close();
  });

  it("a sidelined channel leaves the rotation for its cool-down; the avoided channel is the last resort", async () => {
    const pool = poolOf({ bad: 5, good: 5 }, 50, () => 0);
    pool.sideline("bad", "HTTP 401 AuthenticationError");
    expect(pool.anyInRotation(["bad"])).toBe(false);
    expect(pool.report().find((row) => row.channel === "bad")).toMatchObject({ state: "cooling down", recentErrors: [{ message: "HTTP 401 AuthenticationError" }] });
    expect((await pool.acquire("a", ["bad", "good"], never)).channel).toBe("good");
    // A task already at the sidelined channel's upstream is still polled there.
    expect((await pool.acquire("a", ["bad"], never, { pinned: true })).channel).toBe("bad");
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(pool.anyInRotation(["bad"])).toBe(true);
    expect((await pool.acquire("a", ["bad", "good"], never, { avoid: "bad" })).channel).toBe("good");
    pool.close();
  });

  it("a failed clean-up (deleteAfterCopy) is logged once per channel with its reason and counted in the report; the channel stays in rotation", () => {
    const lines: Array<{ channel?: string; why?: string; msg?: string }> = [];
    const recording = pino({ level: "warn" }, { write: (line: string) => lines.push(JSON.parse(line) as { channel?: string; why?: string; msg?: string }) });
    const pool = new ChannelPool(new Map([["relay", { kind: "openai", provider: provider(5), weight: 1, coolDownMs: 60_000 }]]), recording);
    const why = "the upstream does not support DELETE /videos/{id}: unsupported operation (HTTP 405): HTTP 405";
    pool.cleanupFailed("relay", why);
    pool.cleanupFailed("relay", why);
    pool.cleanupFailed("relay", why);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ channel: "relay", why });
    expect(pool.report()[0]).toMatchObject({ state: "in rotation", recentErrors: [], cleanupFailures: { count: 3, last: { message: why } } });
    pool.close();
  });
});
