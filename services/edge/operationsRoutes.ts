import type { z } from "zod";
import { VIDEO_API, type HealthAnswer } from "../../contracts/videoApi.ts";
import type { Logger } from "../shared/log.ts";
import { collectProcessMetrics } from "../shared/metrics/processMetrics.ts";
import { NotFoundError } from "../shared/errors.ts";
import { publicOpenApiDocument } from "./http/openApiDocument.ts";
import { jsonReply } from "./http/reply.ts";
import { replyRoute, type TableRoute } from "./http/routeTable.ts";

const isLoopback = (address: string): boolean => address === "::1" || address.startsWith("127.") || address.startsWith("::ffff:127.");

/** `/healthz`: what keeps this edge from answering correctly (issue 35's feeds decide what counts), none when healthy. */
export function healthRoutes(problems: () => string[]): TableRoute[] {
  return replyRoute(VIDEO_API.health, () => {
    const found = problems();
    const answer: z.input<typeof HealthAnswer> = { status: found.length === 0 ? "ok" : found.join("; ") };
    return jsonReply(found.length === 0 ? 200 : 503, answer);
  });
}

export function metricsRoutes(log: Logger): TableRoute[] {
  return replyRoute(VIDEO_API.metrics, async ({ request }) => {
    // On the public port, only for clients on this machine (a local Prometheus or agent); operators who
    // scrape from elsewhere use REELAY_METRICS_PORT on an internal interface.
    if (!isLoopback(request.peer)) throw new NotFoundError("no such endpoint: GET /metrics");
    try {
      const { contentType, text } = await collectProcessMetrics();
      return { status: 200, headers: { "content-type": contentType }, body: text };
    } catch (error) {
      log.error({ err: error }, "collecting metrics failed");
      return jsonReply(500, { code: 500, msg: "collecting metrics failed" });
    }
  });
}

/** `GET /openapi.json`: the public API's OpenAPI 3.1 document, made once from the whole table (this row included). */
export function withOpenApiRoute(rows: readonly TableRoute[]): TableRoute[] {
  let document = "";
  const served = replyRoute(VIDEO_API.openApi, () => ({ status: 200, headers: { "content-type": "application/json" }, body: document }));
  const all = [...rows, ...served];
  document = JSON.stringify(publicOpenApiDocument(all));
  return all;
}
