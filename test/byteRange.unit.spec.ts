import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decideRange, type RangeDecision } from "../services/edge/video/byteRange.ts";

const SIZE = 1000;
const WHOLE: RangeDecision = { kind: "whole" };
const UNSATISFIABLE: RangeDecision = { kind: "unsatisfiable" };
const partial = (start: number, end: number): RangeDecision => ({ kind: "partial", start, end });

describe("decideRange (RFC 9110 §14, single byte ranges) for a 1000-byte body", () => {
  describe("given a first-last range inside the body", () => {
    it.each<[string, RangeDecision]>([
      ["bytes=0-499", partial(0, 499)],
      ["bytes=500-999", partial(500, 999)],
      ["bytes=0-0", partial(0, 0)],
      ["bytes=999-999", partial(999, 999)],
      ["bytes=10-19", partial(10, 19)],
      ["bytes=007-010", partial(7, 10)],
    ])("when Range is %s, then %j", (header, decision) => {
      expect(decideRange(header, SIZE)).toEqual(decision);
    });
  });

  describe("given a last-pos at or past the end", () => {
    it.each<[string, RangeDecision]>([
      ["bytes=0-999", partial(0, 999)],
      ["bytes=0-1000", partial(0, 999)],
      ["bytes=900-5000", partial(900, 999)],
      ["bytes=0-99999999999999999999999", partial(0, 999)],
    ])("when Range is %s, then last-pos is clipped to the end: %j", (header, decision) => {
      expect(decideRange(header, SIZE)).toEqual(decision);
    });
  });

  describe("given an open-ended range (first-pos only)", () => {
    it.each<[string, RangeDecision]>([
      ["bytes=0-", partial(0, 999)],
      ["bytes=500-", partial(500, 999)],
      ["bytes=999-", partial(999, 999)],
    ])("when Range is %s, then it runs to the end: %j", (header, decision) => {
      expect(decideRange(header, SIZE)).toEqual(decision);
    });
  });

  describe("given a suffix range (the last N bytes)", () => {
    it.each<[string, RangeDecision]>([
      ["bytes=-1", partial(999, 999)],
      ["bytes=-500", partial(500, 999)],
      ["bytes=-1000", partial(0, 999)],
      ["bytes=-2000", partial(0, 999)],
    ])("when Range is %s, then %j (a suffix longer than the body selects all of it)", (header, decision) => {
      expect(decideRange(header, SIZE)).toEqual(decision);
    });

    it("when the suffix length is zero, then it is unsatisfiable", () => {
      expect(decideRange("bytes=-0", SIZE)).toEqual(UNSATISFIABLE);
    });
  });

  describe("given a first-pos at or beyond the size", () => {
    it.each(["bytes=1000-", "bytes=1000-1000", "bytes=1000-2000", "bytes=5000-", "bytes=99999999999999999999-"])(
      "when Range is %s, then 416 unsatisfiable",
      (header) => {
        expect(decideRange(header, SIZE)).toEqual(UNSATISFIABLE);
      },
    );
  });

  describe("given a header that is absent, malformed or invalid (a server may ignore it and send the whole body)", () => {
    it.each([
      ["absent", ""],
      ["no positions", "bytes=-"],
      ["last before first (invalid byte-range-spec)", "bytes=500-100"],
      ["another unit", "items=0-5"],
      ["no unit", "0-499"],
      ["no '='", "bytes 0-499"],
      ["negative first-pos", "bytes=-5-10"],
      ["non-digits", "bytes=a-b"],
      ["decimal positions", "bytes=1.5-2"],
      ["hex positions", "bytes=0x10-0x20"],
      ["a trailing comma", "bytes=0-5,"],
      ["a plus sign", "bytes=+5-10"],
      ["garbage", "\u0000\uffff🦊"],
    ])("when Range is %s (%j), then the whole body", (_label, header) => {
      expect(decideRange(header, SIZE)).toEqual(WHOLE);
    });

    it.each(["bytes=0-1,5-6", "bytes=0-10, 20-30", "bytes=-5,0-1", "bytes=0-1,2000-3000"])(
      "when Range asks for several ranges (%s), then they are ignored and the whole body is sent",
      (header) => {
        expect(decideRange(header, SIZE)).toEqual(WHOLE);
      },
    );
  });

  describe("given spelling RFC 9110 allows", () => {
    it.each<[string, RangeDecision]>([
      ["BYTES=0-499", partial(0, 499)],
      ["Bytes=-100", partial(900, 999)],
      ["bytes= 0-499", partial(0, 499)],
      ["  bytes=10-19  ", partial(10, 19)],
    ])("when Range is %j (unit names are case-insensitive, OWS after '='), then %j", (header, decision) => {
      expect(decideRange(header, SIZE)).toEqual(decision);
    });
  });

  describe("given an empty body", () => {
    it("when the range starts at 0, then it is unsatisfiable (no first byte exists)", () => {
      expect(decideRange("bytes=0-", 0)).toEqual(UNSATISFIABLE);
      expect(decideRange("bytes=0-10", 0)).toEqual(UNSATISFIABLE);
    });

    it("when a non-zero suffix is asked, then the whole (empty) body, never an inverted range", () => {
      expect(decideRange("bytes=-5", 0)).toEqual(WHOLE);
    });
  });

  describe("for any single range header and any body size", () => {
    const position = fc.oneof(fc.constant(""), fc.nat({ max: 5000 }).map(String), fc.bigInt({ min: 0n, max: 10n ** 30n }).map(String));
    const header = fc.tuple(position, position).map(([first, last]) => `bytes=${first}-${last}`);

    it("then a partial answer lies inside the body and agrees with the header's numbers", () => {
      fc.assert(
        fc.property(header, fc.nat({ max: 4000 }), (range, size) => {
          const decision = decideRange(range, size);
          if (decision.kind !== "partial") return;
          expect(Number.isSafeInteger(decision.start) && Number.isSafeInteger(decision.end)).toBe(true);
          expect(0 <= decision.start && decision.start <= decision.end && decision.end < size).toBe(true);
          const [, first = "", last = ""] = /^bytes=(\d*)-(\d*)$/.exec(range) ?? [];
          if (first !== "") expect(decision.start).toBe(Number(first));
          if (first !== "" && last !== "") expect(decision.end).toBe(Math.min(Number(last), size - 1));
          if (first === "") expect(decision.end - decision.start + 1).toBe(Math.min(Number(last), size));
        }),
        { numRuns: 500 },
      );
    });

    it("then a first-pos inside the body with no inverted last-pos is always satisfied", () => {
      fc.assert(
        fc.property(fc.integer({ min: 1, max: 4000 }), fc.nat(), fc.option(fc.nat()), (size, rawStart, rawLength) => {
          const start = rawStart % size;
          const last = rawLength === null ? "" : String(start + rawLength);
          expect(decideRange(`bytes=${start}-${last}`, size).kind).toBe("partial");
        }),
        { numRuns: 500 },
      );
    });
  });
});
