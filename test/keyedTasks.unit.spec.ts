import { describe, expect, it } from "vitest";
import { SURELY_DEDUPLICATED_MS } from "../infra/jetstreamLayout.ts";
import { KeyedTasks, type KeyedTaskSources } from "../services/edge/video/keyedTasks.ts";
import type { KeyedTask } from "../services/tasks/idempotencyIndex.ts";

const MINUTE = 60_000;
const T0 = Date.parse("2026-11-28T12:00:00Z");
const TASK: KeyedTask = { taskId: 42, fingerprint: "f" };

/** A key index, the reactors' floor and the account's openings, scripted; what was asked of each is recorded. */
function world(options: { indexed?: KeyedTask; oldestUnindexedAt?: number; inLog?: KeyedTask }) {
  let now = T0;
  const floorReads: number[] = [];
  const logReads: Date[] = [];
  let oldest = options.oldestUnindexedAt;
  const sources: KeyedTaskSources = {
    index: { find: async () => options.indexed },
    oldestUnindexedAt: async () => {
      floorReads.push(now);
      return oldest === undefined ? undefined : new Date(oldest);
    },
    openingSince: async (_account, _keyHash, since) => {
      logReads.push(since);
      return options.inLog;
    },
    now: () => now,
  };
  return {
    keyed: new KeyedTasks(sources),
    floorReads,
    logReads,
    advance: (ms: number) => void (now += ms),
    catchUp: (at: number | undefined) => void (oldest = at),
  };
}

describe("the task an Idempotency-Key made, when the key index lags", () => {
  it("given the key in the index, then its task, without reading the reactors' floor", async () => {
    const { keyed, floorReads } = world({ indexed: TASK });
    expect(await keyed.find("acme", "k")).toEqual(TASK);
    expect(floorReads).toEqual([]);
  });

  it("given reactors that are caught up, then no task, without reading the account's openings; the floor is read again only as the window nears it", async () => {
    const { keyed, floorReads, logReads, advance } = world({ inLog: TASK });
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
    const { keyed, logReads } = world({ oldestUnindexedAt: T0 - 30_000, inLog: TASK });
    expect(await keyed.find("acme", "k")).toBeUndefined();
    expect(logReads).toEqual([]);
  });

  it("given reactors that owe openings from three minutes ago (a projector down), then the account's openings from then on are read, and the key's task found there", async () => {
    const { keyed, logReads } = world({ oldestUnindexedAt: T0 - 3 * MINUTE, inLog: TASK });
    expect(await keyed.find("acme", "k")).toEqual(TASK);
    expect(logReads).toEqual([new Date(T0 - 3 * MINUTE)]);
  });

  it("given reactors two days behind, then only the key's lifetime (24 h) of openings is read", async () => {
    const { keyed, logReads } = world({ oldestUnindexedAt: T0 - 48 * 60 * MINUTE });
    expect(await keyed.find("acme", "k")).toBeUndefined();
    expect(logReads).toEqual([new Date(T0 - 24 * 60 * MINUTE)]);
  });

  it("given lagging reactors, then their floor is read at most once a second, however many keyed creates come, and a later reading that they caught up is believed", async () => {
    const { keyed, floorReads, logReads, advance, catchUp } = world({ oldestUnindexedAt: T0 - 3 * MINUTE });
    await Promise.all([keyed.find("acme", "a"), keyed.find("acme", "b"), keyed.find("acme", "c")]);
    await keyed.find("acme", "d");
    expect(floorReads).toHaveLength(1);
    expect(logReads).toHaveLength(4);
    catchUp(undefined);
    advance(1_000);
    expect(await keyed.find("acme", "e")).toBeUndefined();
    expect(floorReads).toHaveLength(2);
    expect(logReads).toHaveLength(4);
  });
});
