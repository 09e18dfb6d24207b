import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { costMicros, formatYuan, parseYuan } from "../services/billing/pricing.ts";

const price = (tokens: number, pricePerMillionTokens: number) => costMicros([{ tokens, pricePerMillionTokens }]);

describe("costMicros: tokens × price per million, in integer micro-yuan", () => {
  it("prices design.md's example: 1280×720 for 5 s = 108,900 tokens at 46 ¥/M → 5.0094 ¥", () => {
    const tokens = (1280 * 720 * (24 * 5 + 1)) / 1024;
    expect(tokens).toBe(108_900);
    expect(price(tokens, 46)).toBe(5_009_400);
  });

  it("is zero for zero tokens and for a free model", () => {
    expect(price(0, 46)).toBe(0);
    expect(price(1_000_000, 0)).toBe(0);
  });

  it("rounds half up to the nearest micro-yuan", () => {
    expect(price(1, 0.5)).toBe(1); // 0.5 µ¥
    expect(price(1, 0.4)).toBe(0); // 0.4 µ¥
    expect(price(3, 0.5)).toBe(2); // 1.5 µ¥
    expect(price(1, 1.499999)).toBe(1); // 1.499999 µ¥
  });

  it("rounds once, on the total: two half micro-yuan parts cost one micro-yuan, not two", () => {
    const half = { tokens: 1, pricePerMillionTokens: 0.5 };
    expect(costMicros([half, half])).toBe(1);
    expect(costMicros([half, half, half])).toBe(2); // 1.5 → 2
    // Chat: prompt and completion at their own prices, summed before rounding.
    expect(costMicros([{ tokens: 3, pricePerMillionTokens: 1.1 }, { tokens: 1, pricePerMillionTokens: 4.4 }])).toBe(8); // 3.3 + 4.4 = 7.7
  });

  it("is exact for fractional prices where naive floating point loses a micro-yuan", () => {
    // Each of these is x.5 µ¥ exactly; (tokens / 1e6) × price × 1e6 in doubles lands just under it.
    expect(price(249, 0.5)).toBe(125);
    expect(price(3655, 1.1)).toBe(4021);
    expect(price(11, 2.5)).toBe(28);
    expect(price(65, 0.3)).toBe(20);
    expect(price(87_300, 23)).toBe(2_007_900);
    expect(price(1_000_000, 0.000001)).toBe(1);
  });

  it("stays exact for huge token counts (tokens × price beyond 2^53)", () => {
    // 123,456,789,012,345 tokens × 46.5 ¥/M = 5,740,740,689,074,042.5 µ¥ → half up; doubles would say …042.
    expect(price(123_456_789_012_345, 46.5)).toBe(5_740_740_689_074_043);
    expect(price(Number.MAX_SAFE_INTEGER, 0.5)).toBe(4_503_599_627_370_496);
  });

  it("agrees with exact integer arithmetic for any tokens and any price with up to 6 decimals", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000_000 }), fc.integer({ min: 0, max: 1_000_000_000 }), (tokens, priceMicros) => {
        const exact = (BigInt(tokens) * BigInt(priceMicros) + 500_000n) / 1_000_000n;
        expect(price(tokens, priceMicros / 1_000_000)).toBe(Number(exact));
      }),
    );
  });
});

describe("parseYuan: decimal yuan → integer micro-yuan", () => {
  it("is exact up to six decimal places", () => {
    expect(parseYuan("12.345678")).toBe(12_345_678);
    expect(parseYuan("100")).toBe(100_000_000);
    expect(parseYuan("0.000001")).toBe(1);
    expect(parseYuan("5.0094")).toBe(5_009_400);
    expect(parseYuan("0.1")).toBe(100_000);
    expect(parseYuan(" 7.5 ")).toBe(7_500_000);
    expect(parseYuan("9007199254.740991")).toBe(Number.MAX_SAFE_INTEGER);
  });

  it.each([
    ["seven decimal places", "1.2345678"],
    ["a negative amount", "-5"],
    ["a plus sign", "+5"],
    ["exponent notation", "1e3"],
    ["exponent notation with a fraction", "1.5E2"],
    ["junk", "abc"],
    ["an empty string", ""],
    ["a trailing dot", "1."],
    ["a leading dot", ".5"],
    ["a decimal comma", "1,5"],
    ["hex", "0x10"],
    ["two amounts", "1 2"],
    ["infinity", "Infinity"],
  ])("refuses %s (%j)", (_what, text) => {
    expect(() => parseYuan(text)).toThrow(/up to 6 decimal places/);
  });

  it("refuses zero, however it is written", () => {
    for (const zero of ["0", "0.0", "0.000000", "000"]) expect(() => parseYuan(zero)).toThrow(/greater than zero/);
  });

  it("refuses amounts too large to hold exactly (beyond 2^53 micro-yuan) instead of failing later", () => {
    expect(() => parseYuan("9007199254.740992")).toThrow(/too large/);
    expect(() => parseYuan("999999999999")).toThrow(/too large/);
  });
});

describe("formatYuan: micro-yuan → yuan with six places", () => {
  it("always prints six places", () => {
    expect(formatYuan(5_009_400)).toBe("5.009400");
    expect(formatYuan(0)).toBe("0.000000");
    expect(formatYuan(1)).toBe("0.000001");
    expect(formatYuan(100_000_000)).toBe("100.000000");
    expect(formatYuan(Number.MAX_SAFE_INTEGER)).toBe("9007199254.740991");
  });

  it("prints negatives with one leading minus", () => {
    expect(formatYuan(-1)).toBe("-0.000001");
    expect(formatYuan(-5_009_400)).toBe("-5.009400");
    expect(formatYuan(-0)).toBe("0.000000");
  });

  it("round-trips with parseYuan: parse(format(µ¥)) = µ¥ and format(parse(text)) = text", () => {
    const yuanText = fc
      .tuple(fc.integer({ min: 0, max: 9_007_199_253 }), fc.integer({ min: 0, max: 999_999 }))
      .filter(([whole, fraction]) => whole > 0 || fraction > 0)
      .map(([whole, fraction]) => `${whole}.${String(fraction).padStart(6, "0")}`);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (micros) => {
        expect(parseYuan(formatYuan(micros))).toBe(micros);
      }),
    );
    fc.assert(
      fc.property(yuanText, (text) => {
        expect(formatYuan(parseYuan(text))).toBe(text);
      }),
    );
  });
});
