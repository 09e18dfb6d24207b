import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BodyBudget } from "../services/edge/http/bodyBudget.ts";
import { bodyBytesToHold } from "../services/edge/http/bodyGate.ts";
import type { RequestInfo } from "../services/edge/http/request.ts";
import { RateLimitedError, ServiceUnavailableError } from "../services/shared/errors.ts";

const requestWith = (headers: Record<string, string>): RequestInfo => ({ method: "POST", url: "/", query: "", peer: "", header: (name) => headers[name] ?? "" });

describe("the edge's budget of request bodies", () => {
  it("holds no more than its whole budget, nor one holder more than its share, but for one body alone; every release gives back exactly what it held, once (property)", () => {
    const limits = { totalBytes: 1000, perHolderBytes: 400 };
    const step = fc.oneof(
      fc.record({ kind: fc.constant("hold" as const), holder: fc.constantFrom("a", "b", "c", "d"), bytes: fc.integer({ min: 0, max: 1200 }) }),
      fc.record({ kind: fc.constant("release" as const), index: fc.nat(), twice: fc.boolean() }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const budget = new BodyBudget(limits);
        const held: Array<{ holder: string; bytes: number; release: () => void }> = [];
        for (const s of steps) {
          if (s.kind === "hold") {
            const mine = held.filter((h) => h.holder === s.holder).reduce((sum, h) => sum + h.bytes, 0);
            const all = held.reduce((sum, h) => sum + h.bytes, 0);
            const overShare = mine > 0 && mine + s.bytes > limits.perHolderBytes;
            const overAll = all > 0 && all + s.bytes > limits.totalBytes;
            try {
              held.push({ holder: s.holder, bytes: s.bytes, release: budget.hold(s.holder, s.bytes) });
              expect([overShare, overAll]).toEqual([false, false]);
            } catch (error) {
              expect(error).toBeInstanceOf(overShare ? RateLimitedError : ServiceUnavailableError);
              expect(overShare || overAll).toBe(true);
            }
          } else if (held.length > 0) {
            const [gone] = held.splice(s.index % held.length, 1);
            gone?.release();
            if (s.twice) gone?.release();
          }
          expect(budget.heldBytes).toBe(held.reduce((sum, h) => sum + h.bytes, 0));
        }
      }),
    );
  });

  it("holds a body's declared length, the route's largest body when it declares none, and nothing for one over the limit (refused unread)", () => {
    expect(bodyBytesToHold(requestWith({ "content-length": "1200" }), 1_000_000)).toBe(1200);
    expect(bodyBytesToHold(requestWith({ "content-length": "0" }), 1_000_000)).toBe(0);
    expect(bodyBytesToHold(requestWith({}), 1_000_000)).toBe(1_000_000);
    expect(bodyBytesToHold(requestWith({ "content-length": "5000000" }), 1_000_000)).toBe(0);
    expect(bodyBytesToHold(requestWith({ "content-length": "12, 12" }), 1_000_000)).toBe(1_000_000);
  });
});
