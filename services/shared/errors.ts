/**
 * Errors that carry their wire status, and what OpenAI's error shape says of them. Routes throw these;
 * one function per API family maps them to the wire (services/edge/http/videoErrors.ts: the spec's
 * envelope; openAiErrors.ts: OpenAI's `{error:{…}}`; admin/adminErrors.ts: the admin API's). Anything
 * else is a 500 with a generic message.
 */
export type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 408 | 413 | 414 | 422 | 429 | 431 | 500 | 501 | 502 | 503 | 504;

/**
 * OpenAI's fields for an error, where they are not the defaults of its status: which request field
 * (`param`), which machine-readable `code`, which `type`; and where OpenAI answers the same condition with
 * another status or other words than the spec's endpoints (an unknown model, a missing key).
 */
export interface OpenAiErrorFields {
  param?: string | null;
  code?: string | null;
  type?: string;
  status?: ErrorStatus;
  message?: string;
}

export abstract class ReelayError extends Error {
  abstract readonly status: ErrorStatus;
  constructor(
    message: string,
    readonly openAi: OpenAiErrorFields = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
export class ValidationError extends ReelayError {
  readonly status = 400;
}
export class AuthError extends ReelayError {
  readonly status = 401;
}
/** No `Authorization: Bearer …` at all. */
export class MissingApiKeyError extends AuthError {
  constructor() {
    // OpenAI sends no code for a missing key, and these words.
    super("missing API key: send Authorization: Bearer <API_KEY>", {
      code: null,
      message:
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth " +
        "(i.e. Authorization: Bearer YOUR_KEY).",
    });
  }
}
/**
 * A key we do not know (or no longer know). It carries only a redacted form of the key (never the key:
 * errors get logged), which the chat routes show the way OpenAI does.
 */
export class InvalidApiKeyError extends AuthError {
  /** `hint`: a sentence on what was sent instead of an API key (an admin token), said after the refusal. */
  constructor(readonly redactedKey: string, hint?: string) {
    super(hint === undefined ? "invalid API key" : `invalid API key: ${hint}`, {
      code: "invalid_api_key",
      message: hint === undefined ? incorrectApiKeyMessage(redactedKey) : `${incorrectApiKeyMessage(redactedKey)} ${hint}`,
    });
  }
}

/**
 * OpenAI's exact words for a bad key. Some libraries classify by this text rather than by the status:
 * LiteLLM (litellm_core_utils/exception_mapping_utils.py) turns any OpenAI error whose text holds
 * "invalid_request_error" into a BadRequestError unless it also holds "Incorrect API key provided".
 */
export const incorrectApiKeyMessage = (redactedKey: string): string =>
  `Incorrect API key provided: ${redactedKey}. You can find your API key at the place it was shown to you when it was created ` +
  "(reelay keys create); ask your reelay operator for a new one if it is lost.";
export class ForbiddenError extends ReelayError {
  readonly status = 403;
}
export class NotFoundError extends ReelayError {
  readonly status = 404;
}
export class PayloadTooLargeError extends ReelayError {
  readonly status = 413;
}
/** A known path asked with a method it does not take; `allow` goes out as the Allow header. */
export class MethodNotAllowedError extends ReelayError {
  readonly status = 405;
  constructor(message: string, readonly allow: readonly string[], openAi?: OpenAiErrorFields) {
    super(message, openAi);
  }
}
/** The request did not arrive whole in time. */
export class RequestTimeoutError extends ReelayError {
  readonly status = 408;
}
export class UriTooLongError extends ReelayError {
  readonly status = 414;
}
export class HeadersTooLargeError extends ReelayError {
  readonly status = 431;
}
/** A method reelay implements for no resource at all (an unknown one, or CONNECT). */
export class NotImplementedError extends ReelayError {
  readonly status = 501;
}
/** Well-formed, but in conflict with an earlier request (an Idempotency-Key reused for another body). */
export class UnprocessableError extends ReelayError {
  readonly status = 422;
}
/** The upstream generator refused a task at submission; the spec answers that with 400. */
export class UpstreamRejectedError extends ReelayError {
  readonly status = 400;
}
/** Generation failed; the spec answers a failed task with 500 and the reason. */
export class GenerationFailedError extends ReelayError {
  readonly status = 500;
}
/** Too many requests (ours, or an upstream's that we pass on so clients back off). */
export class RateLimitedError extends ReelayError {
  readonly status = 429;
}
/** An upstream failed or answered something we cannot relay: the gateway is fine, the hop behind it is not. */
export class UpstreamError extends ReelayError {
  readonly status = 502;
}
/** An upstream did not answer (or went silent) within its configured time. */
export class UpstreamTimeoutError extends ReelayError {
  readonly status = 504;
}
/**
 * Our own infrastructure (NATS) is unreachable or did not answer in time: nothing was done, try again
 * shortly. Not 500, which the spec reserves for a failed generation.
 */
export class ServiceUnavailableError extends ReelayError {
  readonly status = 503;
  constructor(message: string, readonly retryAfterSeconds = 2, options?: ErrorOptions) {
    super(message, {}, options);
  }
}
/**
 * An account's money kept changing under a write for as long as the write may take (other processes writing the
 * same account): surely nothing was written, unlike a write NATS did not answer. Try again shortly.
 */
export class AccountBusyError extends ServiceUnavailableError {
  constructor(options?: ErrorOptions) {
    super("the account's money is busy with other writes: try again shortly", 1, options);
  }
}
/** What a request hears while the edge knows its NATS connection is down. */
export const NATS_DOWN = "service temporarily unavailable (no connection to the message store): try again shortly";
/** Another writer appended to the same task first (JetStream "wrong last sequence", 10071). */
export class ConcurrencyError extends Error {}
