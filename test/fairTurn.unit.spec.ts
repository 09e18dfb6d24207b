import { describe, expect, it } from "vitest";
import { fairTurn, type ChannelTurns } from "../services/runner/policy/fairTurn.ts";

const NOW = 1_000_000;
const turns = (free: number, held: Record<string, number>, waiting: Record<string, number>, served: Record<string, number> = {}): ChannelTurns => ({
  free,
  heldBy: new Map(Object.entries(held)),
  waitingSince: new Map(Object.entries(waiting)),
  servedAt: new Map(Object.entries(served)),
});

/** Whose turn a channel's free slots are, among the accounts waiting anywhere in the fleet. */
describe("fair turns on a channel", () => {
  it("given no free slot, then nobody may claim", () => {
    expect(fairTurn(turns(0, {}, { a: NOW }), "a", NOW)).toBe(false);
  });

  it("given an account alone in line, then it takes every free slot", () => {
    expect(fairTurn(turns(3, { burst: 5 }, { burst: NOW - 10_000 }), "burst", NOW)).toBe(true);
  });

  it("given a burst holding slots and a small account waiting since later, then the small account goes first", () => {
    const channel = turns(1, { burst: 3 }, { burst: NOW - 10_000, small: NOW - 10 });
    expect(fairTurn(channel, "small", NOW)).toBe(true);
    expect(fairTurn(channel, "burst", NOW)).toBe(false);
  });

  it("given both hold nothing, then the account served least recently goes first, a never-served one before all", () => {
    const channel = turns(1, {}, { burst: NOW - 10_000, small: NOW - 10 }, { burst: NOW - 50 });
    expect(fairTurn(channel, "small", NOW)).toBe(true);
    expect(fairTurn(turns(1, {}, { a: NOW - 10, b: NOW - 10 }, { a: NOW - 500, b: NOW - 100 }), "a", NOW)).toBe(true);
  });

  it("given equal holdings and service, then the longer wait goes first; with two free slots both may claim", () => {
    expect(fairTurn(turns(1, {}, { early: NOW - 100, late: NOW - 10 }), "late", NOW)).toBe(false);
    expect(fairTurn(turns(2, {}, { early: NOW - 100, late: NOW - 10 }), "late", NOW)).toBe(true);
  });
});
