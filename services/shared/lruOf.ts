import { LRUCache } from "lru-cache";

const ONE = (): number => 1;

/**
 * An LRU cache of at most `entries` entries that takes memory as it fills. lru-cache given `max` preallocates
 * it all at construction (two arrays of `max` slots filled one by one, and two index arrays): 100,000 entries
 * cost about 20 ms of CPU and 2 MB before anything is stored, and a `reelay serve` made a dozen such caches at
 * every start (every test app, every service thread). Bounded by size, each entry counting one, it keeps the
 * same bound and grows instead (`bench`: the same time per operation).
 */
export function lruOf<K extends {}, V extends {}>(entries: number, options: Omit<LRUCache.Options<K, V, unknown>, "max" | "maxSize" | "sizeCalculation"> = {}): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: entries, sizeCalculation: ONE });
}
