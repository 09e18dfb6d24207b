import { ReelayError } from "../../shared/errors.ts";
import { asServiceUnavailable } from "../../shared/infrastructureErrors.ts";
import type { Logger } from "../../shared/log.ts";
import { jsonReply, type HttpReply } from "../http/reply.ts";

const CODES: Partial<Record<number, string>> = {
  400: "invalid_request",
  401: "invalid_admin_token",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  413: "request_too_large",
  503: "service_unavailable",
};

export interface AdminErrorAnswer {
  status: number;
  body: { error: { message: string; code: string } };
  headers: Record<string, string>;
}

/** The one place admin errors become `{"error": {"message", "code"}}` with a matching HTTP status. */
export function adminError(error: unknown, log: Logger): AdminErrorAnswer {
  const unavailable = error instanceof ReelayError ? undefined : asServiceUnavailable(error);
  const known = error instanceof ReelayError ? error : unavailable;
  if (!known) {
    log.error({ err: error }, "admin API request failed");
    return { status: 500, body: { error: { message: "internal error; see the edge's log", code: "internal_error" } }, headers: {} };
  }
  const headers: Record<string, string> = known.status === 401 ? { "www-authenticate": 'Bearer realm="reelay admin"' } : {};
  return { status: known.status, body: { error: { message: known.message, code: CODES[known.status] ?? "error" } }, headers };
}

export function adminErrorReply(log: Logger): (error: unknown) => HttpReply {
  return (error) => {
    const answer = adminError(error, log);
    return jsonReply(answer.status, answer.body, answer.headers);
  };
}
