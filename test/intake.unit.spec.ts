import { describe, expect, it } from "vitest";
import { admit, HandBackPace, handBackDelayMs, TasksByAccount, waitingShare } from "../services/runner/intake.ts";

/** A waiting set so large that refilling it never bounds the pause. */
const UNBOUNDED = 1e9;
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

  it("an opening below its share handed back (nothing could make room) waits 0.5 s, doubling with each delivery, up to the longest pause", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 100].map((deliveries) => handBackDelayMs(deliveries, 15_000))).toEqual([500, 1_000, 2_000, 4_000, 8_000, 15_000, 15_000, 15_000]);
    expect(handBackDelayMs(3, 500)).toBe(500);
  });

  it("given a runner that hands back far more openings than it starts, then the pause of a burst's tail doubles each second up to its longest", () => {
    const pace = new HandBackPace(15_000, UNBOUNDED, 0);
    const pauses: number[] = [];
    for (let second = 0; second < 7; second++) {
      for (let i = 0; i < 100; i++) pace.handBack(second * 1_000 + i, true);
      pace.hostedOne(second * 1_000 + 500);
      pauses.push(pace.handBack(second * 1_000 + 999, true));
    }
    expect(pauses).toEqual([500, 1_000, 2_000, 4_000, 8_000, 15_000, 15_000]);
  });

  it("given a long pause, when the runner starts more openings than half of those it hands back (the tail is short now), then the pause shrinks by half each second, down to 0.5 s", () => {
    const pace = new HandBackPace(15_000, UNBOUNDED, 0);
    for (let second = 0; second < 6; second++) for (let i = 0; i < 100; i++) pace.handBack(second * 1_000 + i, true);
    const pauses: number[] = [];
    for (let second = 6; second < 12; second++) {
      for (let i = 0; i < 10; i++) pace.hostedOne(second * 1_000 + i);
      pauses.push(pace.handBack(second * 1_000 + 999, true));
    }
    expect(pauses).toEqual([15_000, 7_500, 3_750, 1_875, 938, 500]);
  });

  it("given hand-backs at twice the starts, then the pause holds", () => {
    const pace = new HandBackPace(15_000, UNBOUNDED, 0);
    for (let i = 0; i < 40; i++) pace.handBack(i, true);
    for (let second = 1; second < 4; second++) {
      for (let i = 0; i < 10; i++) pace.hostedOne(second * 1_000 + i);
      for (let i = 0; i < 20; i++) pace.handBack(second * 1_000 + 100 + i, true);
    }
    expect(pace.handBack(4_000, true)).toBe(1_000);
  });

  it("given a runner that starts 500 openings a second and holds 1,000 waiting, then a tail's pause is at most the 2 s its set takes to refill, however much it hands back", () => {
    const pace = new HandBackPace(15_000, 1_000, 0);
    let pause = 0;
    for (let second = 0; second < 8; second++) {
      for (let i = 0; i < 500; i++) pace.hostedOne(second * 1_000 + i);
      for (let i = 0; i < 5_000; i++) pause = pace.handBack(second * 1_000 + 500 + i / 10, true);
    }
    expect(pause).toBe(2_000);
  });

  it("given a burst still arriving, when its openings are handed back the first time, then the pause does not grow", () => {
    const pace = new HandBackPace(15_000, UNBOUNDED, 0);
    for (let second = 0; second < 3; second++) for (let i = 0; i < 100; i++) pace.handBack(second * 1_000 + i, false);
    expect(pace.handBack(3_000, false)).toBe(500);
  });

  it("the newest task that may go back is the one handed back, from the first account that has one", () => {
    const tasks = new TasksByAccount<{ account: string; id: number; actor: { evictable(): boolean } }>();
    const task = (account: string, id: number, evictable: boolean) => ({ account, id, actor: { evictable: () => evictable } });
    for (const added of [task("a", 1, true), task("a", 2, true), task("a", 3, false), task("b", 4, true)]) tasks.add(added);
    expect(tasks.newestEvictable(["a", "b"])?.id).toBe(2);
    expect(tasks.waiting((account) => (account === "a" ? 1 : 1))).toEqual(waiting({ a: 2 }));
  });
});
