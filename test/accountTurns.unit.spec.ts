import { describe, expect, it } from "vitest";
import { AccountTurns } from "../services/webhooks/accountTurns.ts";

const SHARE = 10;
let lastTask = 0;
/** A task of its own for each job sent back (what the account's turns are about). */
const nextTask = () => ++lastTask;

describe("AccountTurns: when a job over its account's share comes back", () => {
  it("given deliveries of 1 s and a share of 10, when 30 jobs are sent back at once, then they come back 50 ms apart (twice the pace slots free up at), in turn", () => {
    const turns = new AccountTurns(SHARE);
    turns.took("a", 1_000);
    const waits = Array.from({ length: 30 }, () => turns.waitFor("a", nextTask(), 0));
    expect(waits.slice(0, 3)).toEqual([100, 100, 150]); // the shortest wait is 100 ms
    expect(waits.at(-1)).toBe(1_500);
    for (let i = 3; i < waits.length; i++) expect((waits[i] ?? 0) - (waits[i - 1] ?? 0)).toBe(50);
  });

  it("given an account's turns, when another account's job is sent back, then it waits only for its own account's turns", () => {
    const turns = new AccountTurns(SHARE);
    turns.took("slow", 10_000);
    for (let i = 0; i < 100; i++) turns.waitFor("slow", nextTask(), 0);
    turns.took("fast", 50);
    expect(turns.waitFor("fast", nextTask(), 0)).toBe(100);
  });

  it("given a queue longer than a minute, when more jobs are sent back, then each waits a minute at most, and turns do not run further ahead", () => {
    const turns = new AccountTurns(SHARE);
    turns.took("a", 30_000);
    const waits = Array.from({ length: 100 }, () => turns.waitFor("a", nextTask(), 0));
    expect(Math.max(...waits)).toBe(60_000);
    // A minute later the queue has turned over: the next job waits a minute again, not what 100 turns would add up to.
    expect(turns.waitFor("a", nextTask(), 60_000)).toBe(1_500);
  });

  it("given turns taken long ago, when a job is sent back now, then its turn starts from now", () => {
    const turns = new AccountTurns(SHARE);
    turns.took("a", 1_000);
    for (let i = 0; i < 5; i++) turns.waitFor("a", nextTask(), 0);
    expect(turns.waitFor("a", nextTask(), 10_000)).toBe(100);
  });

  it("given a receiver that got slower, when its deliveries are timed, then its turns spread out with them", () => {
    const turns = new AccountTurns(SHARE);
    turns.took("a", 100);
    for (let i = 0; i < 20; i++) turns.took("a", 5_000);
    // 20 deliveries of 5 s bring the average within 60 ms of it: turns about 250 ms apart.
    const spacing = -(turns.waitFor("a", nextTask(), 1_000_000) - turns.waitFor("a", nextTask(), 1_000_000));
    expect(spacing).toBeGreaterThan(245);
    expect(spacing).toBeLessThanOrEqual(250);
  });

  it("given an account never timed, when its jobs are sent back, then their turns are spaced for deliveries of 200 ms", () => {
    const turns = new AccountTurns(1);
    expect([turns.waitFor("new", nextTask(), 0), turns.waitFor("new", nextTask(), 0), turns.waitFor("new", nextTask(), 0)]).toEqual([100, 200, 300]);
  });

  it("given jobs sent back on the first guess, when the account's first delivery is timed, then its time replaces the guess", () => {
    const turns = new AccountTurns(SHARE);
    turns.waitFor("a", nextTask(), 0);
    turns.took("a", 4_000);
    expect(turns.waitFor("a", nextTask(), 10_000) - turns.waitFor("a", nextTask(), 10_000)).toBe(-200);
  });

  it("given a task's job sent back, when its next job waits behind it, then it comes back one turn after it and takes none", () => {
    const turns = new AccountTurns(SHARE);
    turns.took("a", 1_000);
    for (let i = 0; i < 5; i++) turns.waitFor("a", nextTask(), 0);
    expect(turns.waitFor("a", 77, 0)).toBe(300);
    for (let i = 0; i < 5; i++) turns.waitFor("a", nextTask(), 0);
    expect(turns.behindEarlierJob("a", 77, 100)).toBe(250);
    expect(turns.behindEarlierJob("a", 77, 100)).toBe(250);
    expect(turns.waitFor("a", nextTask(), 0), "the next turn, after the last one taken (550 ms)").toBe(600);
  });

  it("given a task whose earlier job was not sent back here, when its next job waits behind it, then it waits out the account's turns so far", () => {
    const turns = new AccountTurns(SHARE);
    turns.took("a", 1_000);
    for (let i = 0; i < 10; i++) turns.waitFor("a", nextTask(), 0);
    expect(turns.behindEarlierJob("a", 12_345, 100)).toBe(400);
    expect(turns.behindEarlierJob("a", 12_345, 1_000)).toBe(0);
    expect(turns.behindEarlierJob("never-sent-back", 12_345, 0)).toBe(0);
  });
});
