import type { Logger } from "../shared/log.ts";

/** Below this open-file limit the edge says so at start: a few thousand idle connections would reach it. */
const LOW_FILE_LIMIT = 8192;

/**
 * How many client connections the edge holds at once: `configured` (limits.maxConnections), or else three
 * quarters of the process's open-file limit, the rest kept for what else the process opens (in `reelay serve`,
 * the runner's upstream connections and renders, NATS, stored videos). Without a cap, 1,500 idle connections to
 * an edge under a limit of 1,024 made a render fail with EMFILE: an unauthenticated flood failed a paying
 * tenant's task. Undefined (no cap) when neither is known.
 */
export function connectionCap(configured: number, fileLimit: number | undefined, log: Logger): number | undefined {
  if (fileLimit !== undefined && fileLimit < LOW_FILE_LIMIT) {
    log.warn({ openFileLimit: fileLimit }, `this process may open only ${fileLimit} files: raise its limit (ulimit -n, LimitNOFILE) so that connections and the work behind them have room`);
  }
  if (configured > 0) return configured;
  return fileLimit === undefined ? undefined : Math.floor((fileLimit * 3) / 4);
}
