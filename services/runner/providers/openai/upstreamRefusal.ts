import { UpstreamError } from "./openAiVideoApi.ts";
import { parseJsonOrUndefined } from "../httpAnswers.ts";

/**
 * What an OpenAI-compatible upstream's error answer means, read the way OpenAI's own libraries read it: the
 * status first, then `code`/`type` where the status alone is ambiguous (a 429 is a rate limit unless its code
 * is `insufficient_quota`; a 403 with that code is an older reelay's no-balance answer).
 */
export type RefusalKind =
  /** The account behind our key has no balance or quota left: nothing works until it is topped up. */
  | "no balance"
  /** 401: the upstream does not know our key. */
  | "bad key"
  /** 403 otherwise: the key is known but may not do this (a model not enabled for it, a region). */
  | "forbidden"
  /** 404: no such video, or no such path. */
  | "not found"
  /** 405 or 501: the upstream does not implement this operation (LiteLLM's proxy has no DELETE for videos). */
  | "unsupported operation"
  /** 429 otherwise: passing. */
  | "rate limited"
  /** 5xx: passing. */
  | "upstream error"
  /** Any other 4xx: the request's fault (a value the upstream does not take). */
  | "invalid request";

export interface Refusal {
  kind: RefusalKind;
  status: number;
  /** The upstream's own message (OpenAI's `error.message`), or the status when it sent none. */
  message: string;
  code: string | undefined;
}

const QUOTA = "insufficient_quota";

export function refusalOf(status: number, text: string): Refusal {
  const parsed = UpstreamError.safeParse(parseJsonOrUndefined(text));
  const error = parsed.success ? parsed.data.error : undefined;
  const code = error?.code ?? undefined;
  const message = error?.message ?? `HTTP ${status}`;
  return { kind: kindOf(status, code === QUOTA || error?.type === QUOTA), status, message, code };
}

function kindOf(status: number, quota: boolean): RefusalKind {
  if (status === 402 || ((status === 429 || status === 403) && quota)) return "no balance";
  if (status === 401) return "bad key";
  if (status === 403) return "forbidden";
  if (status === 404) return "not found";
  if (status === 405 || status === 501) return "unsupported operation";
  if (status === 429) return "rate limited";
  if (status >= 500) return "upstream error";
  return "invalid request";
}

/** How a refusal reads in a log line, an error and `reelay channels`: what it was, then the upstream's words. */
export const describeRefusal = (refusal: Refusal, what: string): string =>
  `${what}: ${refusal.kind} (HTTP ${refusal.status}${refusal.code ? ` ${refusal.code}` : ""}): ${refusal.message}`;
