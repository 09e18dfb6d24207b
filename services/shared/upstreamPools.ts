import { lruOf } from "./lruOf.ts";
import { Pool } from "undici";

/**
 * Upstream origins a process calls: a few per configured provider or chat model, so the bound is only against a
 * config that names very many. A pool that falls out closes once its calls are answered.
 */
const MAX_POOLS = 256;

/**
 * One undici Pool per upstream origin and set of pool options, for the runner's vendor calls and chat's relays
 * alike: keep-alive connections are reused by every caller with the same needs, and a call through a pool skips
 * the global Agent and `request(url)`'s wrapper (28.2–29.0 µs of CPU per call against 35.8–40.4, client and server
 * together: bench/tools/upstreamCallCost.ts). Options that differ (a connect timeout, say) make pools of their own.
 */
const pools = lruOf<string, Pool>(MAX_POOLS, { dispose: (pool) => void pool.close().catch(() => undefined) });
/** Each options object's part of its pools' keys, written once: callers keep theirs, and a call is on the hot path. */
const optionKeys = new WeakMap<Pool.Options, string>();
const UNDICI_DEFAULTS: Pool.Options = {};

export function upstreamPool(origin: string, options: Pool.Options = UNDICI_DEFAULTS): Pool {
  let optionsKey = optionKeys.get(options);
  if (optionsKey === undefined) {
    optionsKey = JSON.stringify(options);
    optionKeys.set(options, optionsKey);
  }
  const key = `${origin} ${optionsKey}`;
  let pool = pools.get(key);
  if (pool === undefined) {
    pool = new Pool(origin, options);
    pools.set(key, pool);
  }
  return pool;
}

/** Closes every pool's connections at once (tests; a stopping process does not wait for idle ones, undici unrefs them). */
export async function closeUpstreamPools(): Promise<void> {
  const all = [...pools.values()];
  pools.clear();
  await Promise.all(all.map((pool) => pool.destroy()));
}
