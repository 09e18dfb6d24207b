import { describe, expect, it } from "vitest";
import { lruOf } from "../services/shared/lruOf.ts";

describe("a cache that grows as it fills (lruOf)", () => {
  it("keeps at most its entries, dropping the least recently used, and passes its other options on", () => {
    const disposed: string[] = [];
    const cache = lruOf<string, number>(3, { dispose: (_value, key) => void disposed.push(key) });
    for (const [key, value] of [["a", 1], ["b", 2], ["c", 3]] as const) cache.set(key, value);
    cache.get("a");
    cache.set("d", 4);
    expect([...cache.keys()].sort()).toEqual(["a", "c", "d"]);
    expect(cache.size).toBe(3);
    expect(disposed).toEqual(["b"]);
  });
});
