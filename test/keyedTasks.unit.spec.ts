import { describe, expect, it } from "vitest";
import { SURELY_DEDUPLICATED_MS } from "../infra/jetstreamLayout.ts";
import type { OpeningsFrom } from "../services/edge/video/keyedOpenings.ts";
import { KeyedTasks, type KeyedTaskSources } from "../services/edge/video/keyedTasks.ts";
import type { KeyedTask } from "../services/tasks/idempotencyIndex.ts";

const MINUTE = 60_000;
const T0 = Date.parse("2026-11-28T12:00:00Z");

/** An opening in the account's log: its sequence, when it was written, and its key (if any). */
interface Opening {
  seq: number;
  at: number;
  keyHash?: string;
  taskId: number;
}

/** A key index, the reactors' floor and the account's openings, scripted; what was asked of each is recorded. */
function world(options: { indexed?: Record<string, KeyedTask>; oldestUnindexedAt?: number; log?: Opening[] }) {
  let now = T0;
  const floorReads: number[] = [];
  const logReads: OpeningsFrom[] = [];
  let openingsRead = 0;
  let oldest = options.oldestUnindexedAt;
  const log = options.log ?? [];
  const sources: KeyedTaskSources = {
    index: { find: async (_account, keyHash) => options.indexed?.[keyHash] },
    oldestUnindexedAt: async () => {
      floorReads.push(now);
      return oldest === undefined ? undefined : new Date(oldest);
    },
    keyedOpenings: async (_account, from, max) => {
      logReads.push(from);
      const after = log.filter((o) => ("seq" in from ? o.seq >= from.seq : o.at >= from.start_time.getTime())).slice(0, Math.max(0, max));
      openingsRead += after.length;
      const last = after.at(-1);
      return {
        keyed: after.flatMap((o) => (o.keyHash === undefined ? [] : [{ keyHash: o.keyHash, task: { taskId: o.taskId, fingerprint: "f" } }])),
        read: after.length,
        next: last ? { seq: last.seq + 1 } : from,
      };
    },
    now: () => now,
  };
  return {
    keyed: new KeyedTasks(sources),
    floorReads,
    logReads,
    openingsRead: () => openingsRead,
    advance: (ms: number) => void (now += ms),
    catchUp: (at: number | undefined) => void (oldest = at),
    write: (opening: Opening) => void log.push(opening),
  };
}

const task = (taskId: number): KeyedTask => ({ taskId, fingerprint: "f" });

describe("the task an Idempotency-Key made, when the key index lags", () => {
  it("given the key in the index, then its task, without reading the reactors' floor", async () => {
    const { keyed, floorReads } = world({ indexed: { k: task(42) } });
    expect(await keyed.find("acme", "k")).toEqual(task(42));
    expect(floorReads).toEqual([]);
  });

  it("given reactors that are caught up, then no task, without reading the account's openings; the floor is read again only as the window nears it", async () => {
    const { keyed, floorReads, logReads, advance } = world({ log: [{ seq: 1, at: T0 - 10 * MINUTE, keyHash: "k", taskId: 42 }] });
    expect(await keyed.find("acme", "k")).toBeUndefined();
    advance(30_000);
    expect(await keyed.find("acme", "k")).toBeUndefined();
    expect(floorReads).toHaveLength(1);
    // An observation is good until the server's msgID memory no longer reaches it; read again a minute before.
    advance(SURELY_DEDUPLICATED_MS - 60_000);
    expect(await keyed.find("acme", "k")).toBeUndefined();
    expect(floorReads).toHaveLength(2);
    expect(logReads).toEqual([]);
  });

  it("given reactors that still owe an opening written within the duplicate window, then no task (the write itself finds that one by its msgID)", async () => {
    const { keyed, logReads } = world({ oldestUnindexedAt: T0 - 30_000, log: [{ seq: 1, at: T0 - 30_000, keyHash: "k", taskId: 42 }] });
    expect(await keyed.find("acme", "k")).toBeUndefined();
    expect(logReads).toEqual([]);
  });

  it("given reactors that owe openings from three minutes ago (a projector down), then the account's openings from then on are read, and the key's task found there", async () => {
    const { keyed, logReads } = world({
      oldestUnindexedAt: T0 - 3 * MINUTE,
      log: [
        { seq: 7, at: T0 - 3 * MINUTE, taskId: 41 },
        { seq: 9, at: T0 - 3 * MINUTE + 1, keyHash: "k", taskId: 42 },
      ],
    });
    expect(await keyed.find("acme", "k")).toEqual(task(42));
    expect(logReads).toEqual([{ start_time: new Date(T0 - 3 * MINUTE) }]);
  });

  it("given reactors two days behind, then only the key's lifetime (24 h) of openings is read", async () => {
    const { keyed, logReads } = world({ oldestUnindexedAt: T0 - 48 * 60 * MINUTE });
    expect(await keyed.find("acme", "k")).toBeUndefined();
    expect(logReads).toEqual([{ start_time: new Date(T0 - 24 * 60 * MINUTE) }]);
  });

  it("given lagging reactors and many keyed creates, then the account's openings are read once, each later create reading only the ones written since", async () => {
    const log: Opening[] = Array.from({ length: 500 }, (_, i) => ({ seq: i + 1, at: T0 - 5 * MINUTE + i, keyHash: `old-${i}`, taskId: i + 1 }));
    const { keyed, logReads, openingsRead, write, advance } = world({ oldestUnindexedAt: T0 - 5 * MINUTE, log });
    const found = await Promise.all(Array.from({ length: 20 }, (_, i) => keyed.find("acme", `old-${i * 20}`)));
    expect(found.map((t) => t?.taskId)).toEqual(Array.from({ length: 20 }, (_, i) => i * 20 + 1));
    expect(openingsRead()).toBe(500);
    write({ seq: 501, at: T0, keyHash: "new", taskId: 501 });
    advance(10);
    expect(await keyed.find("acme", "new")).toEqual(task(501));
    expect(openingsRead()).toBe(501);
    expect(logReads.at(-1)).toEqual({ seq: 501 });
  });

  it("given lagging reactors, then their floor is read at most once a second, and a later reading that they caught up is believed (nothing read for the lag is kept)", async () => {
    const { keyed, floorReads, logReads, advance, catchUp } = world({ oldestUnindexedAt: T0 - 3 * MINUTE });
    await Promise.all([keyed.find("acme", "a"), keyed.find("acme", "b"), keyed.find("acme", "c")]);
    await keyed.find("acme", "d");
    expect(floorReads).toHaveLength(1);
    catchUp(undefined);
    advance(1_000);
    const readsBefore = logReads.length;
    expect(await keyed.find("acme", "e")).toBeUndefined();
    expect(floorReads).toHaveLength(2);
    expect(logReads).toHaveLength(readsBefore);
  });

  it("given an account with more openings since the lag began than the edge reads to cover it, then 503 (not knowing is not 'none'), and no more of its log is read", async () => {
    const log: Opening[] = Array.from({ length: 20_001 }, (_, i) => ({ seq: i + 1, at: T0 - 5 * MINUTE, taskId: i + 1 }));
    const { keyed, openingsRead } = world({ oldestUnindexedAt: T0 - 5 * MINUTE, log });
    await expect(keyed.find("acme", "k")).rejects.toThrow(/Idempotency-Key index is behind.*retry shortly/);
    await expect(keyed.find("acme", "k")).rejects.toThrow(/Idempotency-Key index is behind/);
    expect(openingsRead()).toBe(20_001);
  });
});
