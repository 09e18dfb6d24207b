import uWS from "uWebSockets.js";
import type { Logger } from "../../shared/log.ts";

export { uWS };
export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from "uWebSockets.js";

/**
 * The uWebSockets.js build we ship loads native binaries for Node 16/18/20 only; elsewhere it silently
 * falls back to a slow JS implementation (its App is then a `TemplatedApp`). We refuse that unless the
 * operator says otherwise, because every latency figure in the README assumes the native server.
 */
export function assertNativeUws(log: Logger): void {
  const implementation = uWS.App().constructor.name;
  if (implementation === "uWS.App") return;
  const message =
    `uWebSockets.js native binary did not load on Node ${process.version} (got the "${implementation}" JS fallback, ` +
    "many times slower). Run reelay on Node 20 (see README, 'Node versions'), or set REELAY_ALLOW_SLOW_HTTP=1 to run anyway.";
  if (process.env.REELAY_ALLOW_SLOW_HTTP === "1") {
    log.error(message);
    return;
  }
  throw new Error(message);
}
