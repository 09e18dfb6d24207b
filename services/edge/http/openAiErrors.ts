import type { OpenAIErrorBody } from "../../../contracts/openAiApi.ts";
import { ReelayError, type ErrorStatus } from "../../shared/errors.ts";
import { asServiceUnavailable } from "../../shared/infrastructureErrors.ts";
import type { Logger } from "../../shared/log.ts";
import { errorHeaders } from "./errorHeaders.ts";

/**
 * The one place where errors become OpenAI's `{error:{message,type,param,code}}`, on every OpenAI-shaped
 * endpoint (chat, models, videos). Client libraries pick their exception class from the HTTP status, so the
 * status is the one OpenAI sends for the same condition: the error's own unless its OpenAI fields say
 * otherwise (an exhausted balance: 429 `insufficient_quota`, where the spec's endpoints answer 403); `type`
 * and `code` follow the values OpenAI itself sends, so code written against OpenAI keeps working.
 * docs/api.md ("Errors: the spec's answer and OpenAI's") has the table.
 */

const DEFAULTS: Record<ErrorStatus, { type: string; code: string | null }> = {
  400: { type: "invalid_request_error", code: null },
  401: { type: "invalid_request_error", code: "invalid_api_key" },
  403: { type: "invalid_request_error", code: null },
  404: { type: "invalid_request_error", code: null },
  405: { type: "invalid_request_error", code: null },
  408: { type: "invalid_request_error", code: null },
  413: { type: "invalid_request_error", code: "request_too_large" },
  414: { type: "invalid_request_error", code: null },
  422: { type: "invalid_request_error", code: null },
  429: { type: "requests", code: "rate_limit_exceeded" },
  431: { type: "invalid_request_error", code: null },
  500: { type: "server_error", code: null },
  501: { type: "invalid_request_error", code: null },
  502: { type: "upstream_error", code: "bad_gateway" },
  503: { type: "server_error", code: "service_unavailable" },
  504: { type: "timeout", code: "upstream_timeout" },
};

export interface OpenAiErrorAnswer {
  status: ErrorStatus;
  body: OpenAIErrorBody;
  /** Retry-After on a 503 (OpenAI clients wait that long before their retry), Allow on a 405, x-should-retry on a quota. */
  headers?: Record<string, string>;
}

/**
 * `x-should-retry: false` tells the official SDKs, which retry every 429, that retrying an exhausted quota
 * cannot help until the account is topped up.
 */
function headersOf(error: ReelayError): Record<string, string> | undefined {
  if (error.openAi.type === "insufficient_quota") return { "x-should-retry": "false" };
  return errorHeaders(error);
}

export function openAiError(error: unknown, log: Logger): OpenAiErrorAnswer {
  const unavailable = error instanceof ReelayError ? undefined : asServiceUnavailable(error);
  if (unavailable) log.warn({ err: error }, "infrastructure unavailable in an OpenAI-shaped route");
  const known = error instanceof ReelayError ? error : unavailable;
  if (!known) {
    // Never a stack trace on the wire; the log keeps it.
    log.error({ err: error }, "unexpected error in an OpenAI-shaped route");
    return { status: 500, body: { error: { message: "internal error", type: "server_error", param: null, code: null } } };
  }
  const { openAi } = known;
  const status = openAi.status ?? known.status;
  const fallback = DEFAULTS[status];
  const headers = headersOf(known);
  return {
    status,
    body: {
      error: {
        message: openAi.message ?? known.message,
        type: openAi.type ?? fallback.type,
        param: openAi.param ?? null,
        code: openAi.code === undefined ? fallback.code : openAi.code,
      },
    },
    ...(headers ? { headers } : {}),
  };
}

/** The SSE event that ends a stream which already answered 200: OpenAI clients raise it as an APIError. */
export function openAiErrorEvent(error: unknown, log: Logger): string {
  return `data: ${JSON.stringify(openAiError(error, log).body)}\n\n`;
}
