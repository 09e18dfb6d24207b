import {
  PayloadTooLargeError,
  RateLimitedError,
  UpstreamError,
  UpstreamTimeoutError,
  ValidationError,
  type ReelayError,
} from "../../../../shared/errors.ts";
import { errors as undiciErrors } from "undici";
import type { Logger } from "../../../../shared/log.ts";

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
 * What the client sees of an upstream's refusal. The client's own mistakes (400, 413, 422) are passed on
 * with the upstream's message, so clients raise the exception they would raise against the upstream
 * itself. A rate limit (429) keeps its status so clients back off, but in reelay's words: the upstream's
 * text names our upstream account, its quota and its organisation, which are no customer's business.
 * Everything else is the gateway's problem, not the client's: a rejected upstream key or an unknown
 * upstream model is our configuration (502), a 5xx is a bad gateway hop (502), and an upstream timeout
 * stays a timeout (504). The upstream's own words go to the log only.
 */
export function upstreamFailure(status: number, body: Buffer, model: string, log: Logger): ReelayError {
  const fields = errorFields(body);
  const message = text(fields.message);
  const detail = { param: text(fields.param) ?? null, code: text(fields.code) ?? null, type: text(fields.type) };
  if (status === 400 || status === 422) return new ValidationError(message ?? `the upstream refused the request (${status})`, detail);
  if (status === 413) return new PayloadTooLargeError(message ?? "request too large for the upstream");
  if (status === 429) {
    log.warn({ model, upstreamStatus: status, upstreamMessage: message }, "chat upstream is rate limiting");
    return new RateLimitedError(`the upstream for model ${model} is busy; retry later`);
  }
  if (status === 408 || status === 504) return new UpstreamTimeoutError(`the upstream for model ${model} timed out`);
  if (status === 401 || status === 403 || status === 404) {
    log.error({ model, upstreamStatus: status, upstreamMessage: message }, "chat upstream refused the gateway: check its key and upstreamModel");
    return new UpstreamError(`the upstream for model ${model} is misconfigured`);
  }
  log.warn({ model, upstreamStatus: status, upstreamMessage: message }, "chat upstream failed");
  return new UpstreamError(`the upstream for model ${model} failed (${status})`);
}

/** Where an exchange was when it failed without an HTTP answer to report. */
export type UpstreamPhase = "head" | "body" | "stream";

/** undici's timeouts: connecting, waiting for the head, and silence between body reads (not while paused). */
const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);
/** Failures that mean no connection was ever made (DNS, refused, unroutable). */
const UNREACHABLE_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

const codeOf = (error: unknown): string | undefined => {
  const code: unknown = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === "string" ? code : undefined;
};

/**
 * What the client sees when the exchange itself failed (no status to pass on): a timeout stays a timeout
 * (504, or an SSE error event once streaming), anything else is a broken gateway hop (502). Errors we
 * raised ourselves (through the abort signal) pass through unchanged.
 */
export function transportFailure(error: unknown, model: string, timeoutMs: number, phase: UpstreamPhase): ReelayError {
  if (error instanceof UpstreamError || error instanceof UpstreamTimeoutError) return error;
  const code = codeOf(error);
  if (code !== undefined && TIMEOUT_CODES.has(code)) return new UpstreamTimeoutError(`the upstream for model ${model} did not answer within ${timeoutMs} ms`);
  const cause = code ?? (error instanceof Error ? error.message : String(error));
  if (error instanceof undiciErrors.HTTPParserError || code === "UND_ERR_HEADERS_OVERFLOW" || code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH") {
    return new UpstreamError(`the upstream for model ${model} answered malformed HTTP (${cause})`);
  }
  if (phase === "stream") return new UpstreamError(`the upstream for model ${model} broke off the stream (${cause})`);
  if (phase === "body") return new UpstreamError(`the upstream for model ${model} broke off its answer (${cause})`);
  if (code !== undefined && UNREACHABLE_CODES.has(code)) return new UpstreamError(`cannot reach the upstream for model ${model}: ${code}`);
  return new UpstreamError(`the upstream for model ${model} closed the connection before answering (${cause})`);
}
