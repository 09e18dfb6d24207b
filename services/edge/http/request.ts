import type { HttpRequest, HttpResponse } from "./uws.ts";
import { PayloadTooLargeError, ValidationError } from "../../shared/errors.ts";

/** What a route may read of a request: copied out synchronously, because uWS's `req` dies after the handler returns. */
export interface RequestInfo {
  method: string;
  url: string;
  query: string;
  header(name: string): string;
}

export const ALL_HEADERS = ["authorization", "content-type", "content-length", "host", "range", "idempotency-key", "x-forwarded-proto", "traceparent", "tracestate", "last-event-id"] as const;
export type HeaderName = (typeof ALL_HEADERS)[number];

/** Copies the request line and the named headers (only those: copying costs on the hot path). */
export function captureRequest(req: HttpRequest, names: readonly HeaderName[] = ALL_HEADERS): RequestInfo {
  const headers = new Map<string, string>();
  for (const name of names) {
    const value = req.getHeader(name);
    if (value) headers.set(name, value);
  }
  return {
    method: req.getMethod().toUpperCase(),
    url: req.getUrl(),
    query: req.getQuery() ?? "",
    header: (name: string) => headers.get(name) ?? "",
  };
}

/**
 * Reads the whole body, copying each chunk (uWS reuses the ArrayBuffer) and enforcing the size limit
 * while reading, so an oversized body costs at most `maxBytes` of memory.
 */
export function readBody(res: HttpResponse, info: RequestInfo, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(info.header("content-length"));
    if (Number.isFinite(declared) && declared > maxBytes) {
      reject(new PayloadTooLargeError(`request body is ${declared} bytes; the limit is ${maxBytes}`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    res.onData((chunk, isLast) => {
      if (refused) return;
      size += chunk.byteLength;
      if (size > maxBytes) {
        refused = true;
        reject(new PayloadTooLargeError(`request body exceeds the limit of ${maxBytes} bytes`));
        return;
      }
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    });
  });
}

export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw new ValidationError("request body is empty; send a JSON object");
  try {
    return JSON.parse(body.toString("utf8"));
  } catch (error) {
    throw new ValidationError(`request body is not valid JSON: ${(error as Error).message}`);
  }
}
