import { describe, expect, it } from "vitest";
import { admit, handBackDelayMs, TasksByAccount, waitingShare } from "../services/runner/intake.ts";

const waiting = (entries: Record<string, number>) => new Map(Object.entries(entries));

/** How a full runner shares its waiting set among accounts (services/runner/intake.ts). */
describe("fair intake", () => {
  it("an account's share of a full set is the set divided among the accounts waiting, at least one task", () => {
    expect(waitingShare(200, 1)).toBe(200);
    expect(waitingShare(200, 3)).toBe(66);
    expect(waitingShare(4, 10)).toBe(1);
  });

  it("given a full set held by one account, when another account's opening comes, then it takes the place of one of the first's", () => {
    expect(admit("small", waiting({ big: 4 }), 4)).toEqual({ verdict: "replace", from: ["big"] });
  });

  it("given a full set held by one account, when that account's opening comes, then it goes back to the queue", () => {
    expect(admit("big", waiting({ big: 4 }), 4)).toEqual({ verdict: "handBack" });
  });

  it("given two accounts at their shares, when a third's opening comes, then the account furthest over the new share gives way first", () => {
    expect(admit("c", waiting({ a: 2, b: 4 }), 6)).toEqual({ verdict: "replace", from: ["b"] });
    expect(admit("c", waiting({ a: 3, b: 3 }), 6)).toEqual({ verdict: "replace", from: ["a", "b"] });
  });

  it("given accounts at their shares, when one of them sends more, then nobody gives way (no two openings evict each other in turn)", () => {
    expect(admit("a", waiting({ a: 2, b: 2 }), 4)).toEqual({ verdict: "handBack" });
    expect(admit("a", waiting({ a: 1, b: 2, c: 1 }), 4)).toEqual({ verdict: "handBack" });
  });

  it("a handed-back opening waits 0.5 s, doubling with each delivery, up to half a lease", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 100].map((deliveries) => handBackDelayMs(deliveries, 30_000))).toEqual([500, 1_000, 2_000, 4_000, 8_000, 15_000, 15_000, 15_000]);
    expect(handBackDelayMs(3, 500)).toBe(500);
  });

  it("the newest task that may go back is the one handed back, from the first account that has one", () => {
    const tasks = new TasksByAccount<{ account: string; id: number; actor: { evictable(): boolean } }>();
    const task = (account: string, id: number, evictable: boolean) => ({ account, id, actor: { evictable: () => evictable } });
    for (const added of [task("a", 1, true), task("a", 2, true), task("a", 3, false), task("b", 4, true)]) tasks.add(added);
    expect(tasks.newestEvictable(["a", "b"])?.id).toBe(2);
    expect(tasks.waiting((account) => (account === "a" ? 1 : 1))).toEqual(waiting({ a: 2 }));
  });
});
