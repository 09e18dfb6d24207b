import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A span as an OTLP/HTTP JSON export carries it, with the exporting thread. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  thread: string;
}

interface OtlpValue {
  stringValue?: string;
}
interface OtlpExport {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value: OtlpValue }> };
    scopeSpans?: Array<{ spans?: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string }> }>;
  }>;
}

/** OTLP JSON ids are hex; some encoders send base64: read either as hex. */
const hex = (id: string | undefined): string => (!id ? "" : /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, "base64").toString("hex"));

/** An in-memory OTLP/HTTP trace receiver (POST /v1/traces, JSON), as a collector would be. */
export async function startOtlpReceiver(): Promise<{ endpoint: string; spans: ReceivedSpan[]; stop(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (req.url === "/v1/traces" && (req.headers["content-type"] ?? "").includes("json")) {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpExport;
        for (const resourceSpans of body.resourceSpans ?? []) {
          const thread = resourceSpans.resource?.attributes?.find((a) => a.key === "reelay.thread")?.value.stringValue ?? "";
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({ traceId: hex(span.traceId), spanId: hex(span.spanId), parentSpanId: hex(span.parentSpanId), name: span.name, thread });
            }
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { endpoint: `http://127.0.0.1:${port}`, spans, stop: () => new Promise((resolve) => server.close(() => resolve())) };
}
