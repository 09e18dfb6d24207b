import type { OpenAIErrorBody } from "../../../contracts/openAiApi.ts";
import { InsufficientBalanceError } from "../../billing/account.ts";
import { ReelayError, type ErrorStatus } from "../../shared/errors.ts";
import { asServiceUnavailable } from "../../shared/infrastructureErrors.ts";
import type { Logger } from "../../shared/log.ts";
import { errorHeaders } from "./errorHeaders.ts";

/**
 * The one place where errors become OpenAI's `{error:{message,type,param,code}}`, on every OpenAI-shaped
 * endpoint (chat, models, videos). Client libraries pick their exception class from the HTTP status, so the
 * status is the one OpenAI sends for the same condition: the error's own unless its OpenAI fields say
 * otherwise (an unknown video model: 404), or an exhausted balance (429 `insufficient_quota`, where the
 * spec's endpoints answer 403); `type`
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
 * OpenAI's answer to an exhausted balance: 429 with type and code `insufficient_quota` and its own first
 * sentence, which every OpenAI library (LiteLLM's exception mapping among them) classifies as a quota error
 * rather than a passing rate limit. `x-should-retry: false` tells the official SDKs, which retry every 429,
 * that retrying cannot help until the account is topped up.
 */
const QUOTA_MESSAGE = "You exceeded your current quota, please check your plan and billing details.";
const quotaExceeded = (error: InsufficientBalanceError): OpenAiErrorAnswer => ({
  status: 429,
  body: { error: { message: `${QUOTA_MESSAGE} reelay: ${error.message}; ask your reelay operator to credit the account.`, type: "insufficient_quota", param: null, code: "insufficient_quota" } },
  headers: { "x-should-retry": "false" },
});

export function openAiError(error: unknown, log: Logger): OpenAiErrorAnswer {
  const unavailable = error instanceof ReelayError ? undefined : asServiceUnavailable(error);
  if (unavailable) log.warn({ err: error }, "infrastructure unavailable in an OpenAI-shaped route");
  const known = error instanceof ReelayError ? error : unavailable;
  if (!known) {
    // Never a stack trace on the wire; the log keeps it.
    log.error({ err: error }, "unexpected error in an OpenAI-shaped route");
    return { status: 500, body: { error: { message: "internal error", type: "server_error", param: null, code: null } } };
  }
  if (known instanceof InsufficientBalanceError) return quotaExceeded(known);
  const { openAi } = known;
  const status = openAi.status ?? known.status;
  const fallback = DEFAULTS[status];
  const headers = errorHeaders(known);
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
