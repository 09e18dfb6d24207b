import {
  PayloadTooLargeError,
  RateLimitedError,
  UpstreamError,
  UpstreamTimeoutError,
  ValidationError,
  type ReelayError,
} from "../../../../shared/errors.ts";
import type { Logger } from "../../../../shared/log.ts";
import { withDetail } from "../../chatErrors.ts";

interface UpstreamErrorFields {
  message?: unknown;
  type?: unknown;
  param?: unknown;
  code?: unknown;
}

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

function errorFields(body: Buffer): UpstreamErrorFields {
  try {
    const parsed: unknown = JSON.parse(body.toString("utf8"));
    const error = typeof parsed === "object" && parsed !== null ? (parsed as { error?: unknown }).error : undefined;
    if (typeof error === "object" && error !== null) return error as UpstreamErrorFields;
    if (typeof error === "string") return { message: error };
  } catch {
    // Not JSON (a proxy's HTML page, say): the status alone decides.
  }
  return {};
}

/**
 * What the client sees of an upstream's refusal. The client's own mistakes (400, 413, 422) and rate
 * limits (429) are passed on with the upstream's message, so clients raise the exception they would
 * raise against the upstream itself. Everything else is the gateway's problem, not the client's: a
 * rejected upstream key or an unknown upstream model is our configuration (502, details in the log
 * only), a 5xx is a bad gateway hop (502), and an upstream timeout stays a timeout (504).
 */
export function upstreamFailure(status: number, body: Buffer, model: string, log: Logger): ReelayError {
  const fields = errorFields(body);
  const message = text(fields.message);
  const detail = { param: text(fields.param) ?? null, code: text(fields.code) ?? null, type: text(fields.type) };
  if (status === 400 || status === 422) return withDetail(new ValidationError(message ?? `the upstream refused the request (${status})`), detail);
  if (status === 413) return new PayloadTooLargeError(message ?? "request too large for the upstream");
  if (status === 429) return withDetail(new RateLimitedError(message ?? "the upstream is rate limiting; retry later"), detail);
  if (status === 408 || status === 504) return new UpstreamTimeoutError(`the upstream for model ${model} timed out`);
  if (status === 401 || status === 403 || status === 404) {
    log.error({ model, upstreamStatus: status, upstreamMessage: message }, "chat upstream refused the gateway: check its key and upstreamModel");
    return new UpstreamError(`the upstream for model ${model} is misconfigured`);
  }
  log.warn({ model, upstreamStatus: status, upstreamMessage: message }, "chat upstream failed");
  return new UpstreamError(`the upstream for model ${model} failed (${status})${message ? `: ${message}` : ""}`);
}
