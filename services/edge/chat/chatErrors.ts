import type { OpenAIErrorBody } from "../../../contracts/chat.ts";
import { ReelayError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";

/**
 * The one place where errors become OpenAI's `{error:{message,type,param,code}}`. Client libraries pick
 * their exception class from the HTTP status, so the status is the error's own; `type`/`code` follow
 * the values OpenAI itself sends, so code written against OpenAI keeps working.
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
  // The chat routes answer 403 only for an exhausted balance (design.md).
  403: { type: "insufficient_quota", code: "insufficient_quota" },
  404: { type: "invalid_request_error", code: null },
  413: { type: "invalid_request_error", code: "request_too_large" },
  429: { type: "requests", code: "rate_limit_exceeded" },
  500: { type: "server_error", code: null },
  502: { type: "upstream_error", code: "bad_gateway" },
  504: { type: "timeout", code: "upstream_timeout" },
};

export interface ChatErrorAnswer {
  status: ReelayError["status"];
  body: OpenAIErrorBody;
}

export function chatError(error: unknown, log: Logger): ChatErrorAnswer {
  if (error instanceof ReelayError) {
    const fallback = DEFAULTS[error.status];
    const detail = details.get(error);
    return {
      status: error.status,
      body: {
        error: {
          message: error.message,
          type: detail?.type ?? fallback.type,
          param: detail?.param ?? null,
          code: detail?.code ?? fallback.code,
        },
      },
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
