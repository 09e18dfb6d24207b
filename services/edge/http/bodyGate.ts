import type { IncomingMessage, ServerResponse } from "node:http";
import { PayloadTooLargeError } from "../../shared/errors.ts";
import { readBody, type RequestInfo } from "./request.ts";

/**
 * Lets a request's body in before a byte of it is read, or throws the answer (a 401 for a missing or unknown key,
 * a 429 or 503 when the edge holds too many bodies): resolves to what lets the body's room go. `keyed`: the
 * route takes a customer's key.
 */
export type BodyGate = (request: RequestInfo, maxBytes: number, keyed: boolean) => (() => void) | Promise<() => void>;

/** What a gate lets in for one request: its declared length, or the route's largest body without one. */
export function bodyBytesToHold(request: RequestInfo, maxBytes: number): number {
  const declared = Number(request.header("content-length") || Number.NaN);
  return Number.isInteger(declared) && declared >= 0 ? Math.min(declared, maxBytes) : maxBytes;
}

/** The body, read once `gate` lets it in; its room is let go when the answer ends, however it ends. */
export function readGatedBody(req: IncomingMessage, res: ServerResponse, request: RequestInfo, maxBytes: number, keyed: boolean, gate: BodyGate | undefined): Promise<Buffer> {
  if (!gate) return readBody(req, maxBytes);
  let admitted: (() => void) | Promise<() => void>;
  try {
    admitted = gate(request, maxBytes, keyed);
  } catch (error) {
    return Promise.reject(error);
  }
  if (typeof admitted === "function") {
    res.once("close", admitted);
    return readBody(req, maxBytes);
  }
  return admitted.then((release) => {
    res.once("close", release);
    // The client left while its key was looked up: no close is coming any more.
    if (res.closed) release();
    return readBody(req, maxBytes);
  });
}

/**
 * Whether a body the edge will not read may be left to node:http to read and drop (keeping the connection): when
 * it declares a length within the route's limit. A client then sends all of it and reads its answer; closing on
 * it instead made the kernel reset the connection, and a client uploading 9 MB with a mistyped key got EPIPE,
 * not its 401. A body without a length, or a longer one, could be sent without end: its connection is closed.
 */
export function letDrop(refusal: unknown, request: RequestInfo, maxBytes: number): boolean {
  if (refusal instanceof PayloadTooLargeError) return false;
  const declared = Number(request.header("content-length") || Number.NaN);
  return Number.isInteger(declared) && declared >= 0 && declared <= maxBytes;
}
