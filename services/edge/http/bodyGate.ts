import type { IncomingMessage, ServerResponse } from "node:http";
import { LINGER_MS } from "./clientErrors.ts";
import { readBody, type RequestInfo } from "./request.ts";

/**
 * Lets a request's body in before a byte of it is read, or throws the answer (a 401 for a missing or unknown key,
 * a 429 or 503 when the edge holds too many bodies): resolves to what lets the body's room go. `keyed`: the
 * route takes a customer's key.
 */
export type BodyGate = (request: RequestInfo, maxBytes: number, keyed: boolean) => (() => void) | Promise<() => void>;

/**
 * What a gate holds for one request: its declared length, or the route's largest body without one; nothing for
 * a declared length over the limit, which is refused (413) without a byte read.
 */
export function bodyBytesToHold(request: RequestInfo, maxBytes: number): number {
  const declared = Number(request.header("content-length") || Number.NaN);
  if (!Number.isInteger(declared) || declared < 0) return maxBytes;
  return declared > maxBytes ? 0 : declared;
}

/**
 * The body, read once `gate` lets it in; its room is let go when the answer ends, however it ends. A body refused
 * (not let in, or too large) is dropped as it arrives (`dropRefusedBody`) while the caller answers the refusal.
 */
export function readGatedBody(req: IncomingMessage, res: ServerResponse, request: RequestInfo, maxBytes: number, keyed: boolean, gate: BodyGate | undefined): Promise<Buffer> {
  const refused = (error: unknown): never => {
    dropRefusedBody(req);
    throw error;
  };
  return admit(res, request, maxBytes, keyed, gate)
    .then(() => readBody(req, maxBytes))
    .catch(refused);
}

/** Resolves once `gate` (if any) lets the body in, holding its room until the answer ends. */
function admit(res: ServerResponse, request: RequestInfo, maxBytes: number, keyed: boolean, gate: BodyGate | undefined): Promise<void> {
  if (!gate) return Promise.resolve();
  let admitted: (() => void) | Promise<() => void>;
  try {
    admitted = gate(request, maxBytes, keyed);
  } catch (error) {
    return Promise.reject(error);
  }
  const hold = (release: () => void) => {
    res.once("close", release);
    // The client left while its key was looked up: no close is coming any more.
    if (res.closed) release();
  };
  if (typeof admitted !== "function") return admitted.then(hold);
  hold(admitted);
  return Promise.resolve();
}

/** A refused body is read and dropped while bytes keep coming within this (nginx's `lingering_timeout`)… */
const DROP_IDLE_MS = LINGER_MS;
/** …and for this long at most (nginx's `lingering_time`). */
const DROP_AT_MOST_MS = 30_000;

/**
 * Reads and drops the rest of a body the edge refused (too large, no key, no room), keeping the connection, for
 * as long as it keeps coming, then closes it: the client that sends all of its body reads its answer. Closing
 * at once made the kernel reset the connection under the client's writes, and a 10 MB upload with a mistyped key
 * got EPIPE, not its 401; a body that never ends is cut off all the same.
 */
function dropRefusedBody(req: IncomingMessage): void {
  // All of it came, or the client left (the read failed for that): nothing more will arrive.
  if (req.complete || req.socket.destroyed) return;
  const socket = req.socket;
  const cut = () => socket.destroy();
  // Like lingerClose's (clientErrors.ts), these never hold a stopping process.
  const idle = setTimeout(cut, DROP_IDLE_MS).unref();
  const atMost = setTimeout(cut, DROP_AT_MOST_MS).unref();
  const done = () => {
    clearTimeout(idle);
    clearTimeout(atMost);
  };
  req.on("data", () => idle.refresh());
  req.once("end", done);
  req.once("close", done);
  req.resume();
}
