import { createServer, type Server } from "node:http";
import { listenOn } from "../listenOn.ts";
import type { Logger } from "../log.ts";
import { collectProcessMetrics } from "./processMetrics.ts";

/**
 * `GET /metrics` on a port of its own (`REELAY_METRICS_PORT`), for operators who scrape from another
 * host: bind it to an internal interface (`REELAY_METRICS_HOST`); it answers anyone who reaches it.
 */
export async function startMetricsServer(host: string, port: number, log: Logger): Promise<{ port: number; stop(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(path === "/metrics" ? 405 : 404, { "content-type": "text/plain", ...(path === "/metrics" ? { allow: "GET, HEAD" } : {}) });
      res.end(path === "/metrics" ? "use GET /metrics\n" : "not found: metrics are at /metrics\n");
      return;
    }
    collectProcessMetrics().then(
      ({ contentType, text }) => {
        res.writeHead(200, { "content-type": contentType });
        res.end(req.method === "HEAD" ? undefined : text);
      },
      (error: unknown) => {
        log.error({ err: error }, "collecting metrics failed");
        res.writeHead(500, { "content-type": "text/plain" });
        res.end("collecting metrics failed\n");
      },
    );
  });
  const bound = await listenOn(server, { host, port }, { host: "REELAY_METRICS_HOST", port: "REELAY_METRICS_PORT" });
  log.info({ url: `http://${host}:${bound}/metrics` }, "metrics served");
  return {
    port: bound,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
