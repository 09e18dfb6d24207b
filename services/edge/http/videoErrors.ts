import { ReelayError } from "../../shared/errors.ts";
import { asServiceUnavailable } from "../../shared/infrastructureErrors.ts";
import type { Logger } from "../../shared/log.ts";
import { errorHeaders } from "./errorHeaders.ts";

export interface VideoErrorAnswer {
  status: number;
  body: { code: number; msg: string };
  headers?: Record<string, string>;
}

/**
 * The one place where errors become the video API's envelope: HTTP status equals `code` (design.md),
 * the message names the problem, and nothing internal (stack, class name) reaches the client.
 * Infrastructure trouble (NATS unreachable or timing out) is 503 with Retry-After, never 500.
 */
export function videoError(error: unknown, log: Logger): VideoErrorAnswer {
  const unavailable = error instanceof ReelayError ? undefined : asServiceUnavailable(error);
  if (unavailable) log.warn({ err: error }, "infrastructure unavailable in a video route");
  const known = error instanceof ReelayError ? error : unavailable;
  if (known) {
    const headers = errorHeaders(known);
    return { status: known.status, body: { code: known.status, msg: known.message }, ...(headers ? { headers } : {}) };
  }
  log.error({ err: error }, "unexpected error in a video route");
  return { status: 500, body: { code: 500, msg: "internal error" } };
}
