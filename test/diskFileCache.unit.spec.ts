import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buffer } from "node:stream/consumers";
import { describe, expect, it, onTestFinished } from "vitest";
import { DiskFileCache } from "../services/edge/video/diskFileCache.ts";
import { keptFileDescriptors } from "./helpers/keptFiles.ts";

const bytes = (size: number, fill: number) => Buffer.alloc(size, fill);

async function keep(cache: DiskFileCache, name: string, body: Buffer, digest = `d-${name}`): Promise<void> {
  await cache.keep(name, digest, async (append) => {
    for (let at = 0; at < body.length; at += 1000) await append(body.subarray(at, at + 1000));
  });
}

/**
 * A cache whose files are let go when the test ends (their handles were left to the garbage collector); then
 * none may be left open: a lease a test never ended keeps its file's handle.
 */
function cacheOf(budgetBytes: number, dir?: string): DiskFileCache {
  const cache = new DiskFileCache(budgetBytes, dir);
  const before = keptFileDescriptors().length;
  onTestFinished(async () => {
    cache.clear();
    await expect.poll(() => keptFileDescriptors().length).toBe(before);
  });
  return cache;
}

function leased(cache: DiskFileCache, name: string, digest = `d-${name}`) {
  const lease = cache.lease(name, digest);
  if (!lease) throw new Error(`${name} is not kept`);
  return lease;
}

describe("files kept on the edge's disk", () => {
  it("sends any range of a kept file, and keeps nothing in its directory (unlinked at once)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reelay-kept-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const cache = cacheOf(1_000_000, dir);
    const body = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));
    await keep(cache, "a.mp4", body);
    expect(readdirSync(dir)).toEqual([]);
    for (const [start, end] of [[0, 299_999], [0, 0], [65_535, 65_536], [299_990, 299_999], [1000, 200_123]] as const) {
      // Buffer.equals: a deep toEqual of 300,000 bytes took seconds.
      expect((await buffer(leased(cache, "a.mp4").stream(start, end))).equals(body.subarray(start, end + 1))).toBe(true);
    }
    expect(cache.lease("a.mp4", "another digest")).toBeUndefined();
  });

  it("lets the least recently used file go first, never one being read, nor the one just written before its waiting requests take it", async () => {
    const cache = cacheOf(25_000);
    await keep(cache, "a", bytes(10_000, 1));
    await keep(cache, "b", bytes(10_000, 2));
    cache.lease("a", "d-a")?.end();
    await keep(cache, "c", bytes(10_000, 3));
    // b was used least recently.
    expect([cache.lease("b", "d-b"), cache.keptBytes]).toEqual([undefined, 20_000]);
    const reading = cache.lease("a", "d-a");
    await keep(cache, "d", bytes(20_000, 4));
    // c goes; a is being read and d was just written: both stay, over the budget, until a is read.
    expect([cache.lease("c", "d-c"), cache.keptBytes]).toEqual([undefined, 30_000]);
    reading?.end();
    expect(cache.keptBytes).toBe(20_000);
    const big = cache.lease("d", "d-d");
    expect(big?.size).toBe(20_000);
    big?.end();
    // A file larger than the whole budget is let go as soon as no one reads it.
    await keep(cache, "huge", bytes(40_000, 5));
    expect(cache.keptBytes).toBe(40_000);
    cache.lease("huge", "d-huge")?.end();
    expect(cache.keptBytes).toBe(0);
  });

  it("a file dropped while being read is still read to its end, then let go", async () => {
    const cache = cacheOf(1_000_000);
    const body = bytes(500_000, 9);
    await keep(cache, "a", body);
    const stream = leased(cache, "a").stream(0, body.length - 1);
    cache.forget("a");
    expect(cache.keptBytes).toBe(0);
    expect(cache.lease("a", "d-a")).toBeUndefined();
    expect((await buffer(stream)).equals(body)).toBe(true);
  });

  it("a fill that fails keeps nothing, and the last good copy stays", async () => {
    const cache = cacheOf(1_000_000);
    await keep(cache, "a", bytes(1000, 1));
    await expect(
      cache.keep("a", "d-new", async (append) => {
        await append(bytes(10, 2));
        throw new Error("the store's read broke");
      }),
    ).rejects.toThrow("broke");
    const lastGood = leased(cache, "a");
    lastGood.end();
    expect([cache.keptBytes, lastGood.size, cache.lease("a", "d-new")]).toEqual([1000, 1000, undefined]);
  });

  it("clear (the edge stops) closes every file's handle at once, and a file being read when its reader is done", async () => {
    const before = keptFileDescriptors().length;
    const cache = cacheOf(1_000_000);
    await keep(cache, "a", bytes(1000, 1));
    await keep(cache, "b", bytes(2000, 2));
    const reading = leased(cache, "b");
    expect(keptFileDescriptors().length).toBe(before + 2);
    cache.clear();
    expect([cache.keptBytes, cache.lease("a", "d-a"), cache.lease("b", "d-b")]).toEqual([0, undefined, undefined]);
    await expect.poll(() => keptFileDescriptors().length).toBe(before + 1);
    expect((await buffer(reading.stream(0, 1999))).equals(bytes(2000, 2))).toBe(true);
    await expect.poll(() => keptFileDescriptors().length).toBe(before);
    // A store read that was under way when the edge stopped keeps nothing open.
    await keep(cache, "c", bytes(500, 3));
    expect([cache.keptBytes, cache.lease("c", "d-c"), keptFileDescriptors().length]).toEqual([0, undefined, before]);
  });
});
