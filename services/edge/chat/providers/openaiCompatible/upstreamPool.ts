import { Pool } from "undici";

/**
 * One undici Pool per upstream origin, shared by every model that relays to it, so their keep-alive
 * connections are reused across models. A Pool's connect timeout is fixed when it is made, so models
 * with different `timeoutMs` on one origin get one pool each (configs normally have one timeout per
 * upstream, so this is still one pool per base URL in practice).
 */

/**
 * How long an idle connection is kept when the upstream sends no `Keep-Alive: timeout=` hint (undici
 * follows the hint, less a safety margin, when there is one). Long enough that a quiet gateway keeps its
 * TLS sessions warm; the upstream closing an idle connection first is the rare case undici cannot retry
 * for a POST (the client gets a 502, which OpenAI clients retry).
 */
const IDLE_KEEP_ALIVE_MS = 30_000;
/** Response heads larger than this are refused (the hand-written client's limit; undici's default is 16 KiB). */
const MAX_HEADER_BYTES = 64 * 1024;

const pools = new Map<string, Pool>();

export function upstreamPool(origin: string, connectTimeoutMs: number): Pool {
  const key = `${origin} ${connectTimeoutMs}`;
  let pool = pools.get(key);
  if (!pool) {
    pool = new Pool(origin, {
      // One request per connection at a time: a streamed answer holds its connection until it ends, and a
      // pipelined request behind it would wait for the whole stream.
      pipelining: 1,
      keepAliveTimeout: IDLE_KEEP_ALIVE_MS,
      maxHeaderSize: MAX_HEADER_BYTES,
      connect: { timeout: connectTimeoutMs },
    });
    pools.set(key, pool);
  }
  return pool;
}

/** Closes every pool's connections (tests; a stopping process does not wait for idle ones, undici unrefs them). */
export async function closeUpstreamPools(): Promise<void> {
  const all = [...pools.values()];
  pools.clear();
  await Promise.all(all.map((pool) => pool.destroy()));
}
