import type { OpenAIErrorBody } from "../../../contracts/chat.ts";
import { InsufficientBalanceError } from "../../billing/account.ts";
import { InvalidApiKeyError, MissingApiKeyError, ReelayError } from "../../shared/errors.ts";
import { asServiceUnavailable } from "../../shared/infrastructureErrors.ts";
import type { Logger } from "../../shared/log.ts";
import { errorHeaders } from "../http/errorHeaders.ts";

/**
 * The one place where errors become OpenAI's `{error:{message,type,param,code}}`, on every OpenAI-shaped
 * endpoint (chat, models, videos). Client libraries pick their exception class from the HTTP status, so the
 * status is the one OpenAI sends for the same condition — the error's own, except where OpenAI differs from
 * the spec (an exhausted balance: 429 `insufficient_quota`, where the spec's endpoints answer 403); `type`
 * and `code` follow the values OpenAI itself sends, so code written against OpenAI keeps working.
 * docs/api.md ("Errors: the spec's answer and OpenAI's") has the table.
 */

export interface OpenAIErrorDetail {
  param?: string | null;
  code?: string | null;
  type?: string;
}

// Detail rides beside the shared error classes instead of forking them into a chat-only hierarchy.
const details = new WeakMap<Error, OpenAIErrorDetail>();

/** Tags an error with OpenAI fields (which request field, which machine-readable code) and returns it. */
export function withDetail<E extends ReelayError>(error: E, detail: OpenAIErrorDetail): E {
  details.set(error, detail);
  return error;
}

const DEFAULTS: Record<ReelayError["status"], { type: string; code: string | null }> = {
  400: { type: "invalid_request_error", code: null },
  401: { type: "invalid_request_error", code: "invalid_api_key" },
  // A model with no usable channel; an exhausted balance is not a 403 here (see `quotaExceeded`).
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

export interface ChatErrorAnswer {
  status: ReelayError["status"];
  body: OpenAIErrorBody;
  /** Retry-After on a 503 (OpenAI clients wait that long before their retry), Allow on a 405. */
  headers?: Record<string, string>;
}

/**
 * OpenAI's exact words for a bad key. Some libraries classify by this text rather than by the status:
 * LiteLLM (litellm_core_utils/exception_mapping_utils.py) turns any OpenAI error whose text holds
 * "invalid_request_error" into a BadRequestError unless it also holds "Incorrect API key provided".
 */
export const incorrectApiKeyMessage = (redactedKey: string): string =>
  `Incorrect API key provided: ${redactedKey}. You can find your API key at the place it was shown to you when it was created ` +
  "(reelay keys create); ask your reelay operator for a new one if it is lost.";

const MISSING_API_KEY_MESSAGE =
  "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth " +
  "(i.e. Authorization: Bearer YOUR_KEY).";

/**
 * OpenAI's answer to an exhausted balance: 429 with type and code `insufficient_quota` and its own first
 * sentence, which every OpenAI library (LiteLLM's exception mapping among them) classifies as a quota error
 * rather than a passing rate limit. `x-should-retry: false` tells the official SDKs, which retry every 429,
 * that retrying cannot help until the account is topped up.
 */
const QUOTA_MESSAGE = "You exceeded your current quota, please check your plan and billing details.";
const quotaExceeded = (error: ReelayError): ChatErrorAnswer => ({
  status: 429,
  body: { error: { message: `${QUOTA_MESSAGE} reelay: ${error.message}; ask your reelay operator to credit the account.`, type: "insufficient_quota", param: null, code: "insufficient_quota" } },
  headers: { "x-should-retry": "false" },
});

function messageOf(error: ReelayError): string {
  if (error instanceof InvalidApiKeyError) return incorrectApiKeyMessage(error.redactedKey);
  if (error instanceof MissingApiKeyError) return MISSING_API_KEY_MESSAGE;
  return error.message;
}

export function chatError(error: unknown, log: Logger): ChatErrorAnswer {
  const unavailable = error instanceof ReelayError ? undefined : asServiceUnavailable(error);
  if (unavailable) log.warn({ err: error }, "infrastructure unavailable in a chat route");
  const known = error instanceof ReelayError ? error : unavailable;
  if (known instanceof InsufficientBalanceError) return quotaExceeded(known);
  if (known) {
    const fallback = DEFAULTS[known.status];
    const detail = details.get(known);
    const headers = errorHeaders(known);
    return {
      status: known.status,
      body: {
        error: {
          message: messageOf(known),
          type: detail?.type ?? fallback.type,
          param: detail?.param ?? null,
          // OpenAI sends no code for a missing key, and invalid_api_key for a wrong one.
          code: known instanceof MissingApiKeyError ? null : (detail?.code ?? fallback.code),
        },
      },
      ...(headers ? { headers } : {}),
    };
  }
  // Never a stack trace on the wire; the log keeps it.
  log.error({ err: error }, "unexpected error in a chat route");
  return { status: 500, body: { error: { message: "internal error", type: "server_error", param: null, code: null } } };
}

/** The SSE event that ends a stream which already answered 200: OpenAI clients raise it as an APIError. */
export function chatErrorEvent(error: unknown, log: Logger): string {
  return `data: ${JSON.stringify(chatError(error, log).body)}\n\n`;
}
