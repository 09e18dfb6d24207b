/**
 * Errors that carry their wire status. Routes throw these; `services/edge/http/videoErrors.ts` maps them
 * to the spec's envelope and `services/edge/chat/chatErrors.ts` to OpenAI's error shape, each in one place.
 * Anything else is a 500 with a generic message.
 */
export abstract class ReelayError extends Error {
  abstract readonly status: 400 | 401 | 403 | 404 | 413 | 429 | 500 | 502 | 504;
}
export class ValidationError extends ReelayError {
  readonly status = 400;
}
export class AuthError extends ReelayError {
  readonly status = 401;
}
export class ForbiddenError extends ReelayError {
  readonly status = 403;
}
export class NotFoundError extends ReelayError {
  readonly status = 404;
}
export class PayloadTooLargeError extends ReelayError {
  readonly status = 413;
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
/** Another writer appended to the same task first (JetStream "wrong last sequence", 10071). */
export class ConcurrencyError extends Error {}
