import { MethodNotAllowedError, ServiceUnavailableError, type ReelayError } from "../../shared/errors.ts";

/** The headers an error's status calls for, whatever the API's body shape: Retry-After on 503, Allow on 405. */
export function errorHeaders(error: ReelayError): Record<string, string> | undefined {
  if (error instanceof ServiceUnavailableError) return { "retry-after": String(error.retryAfterSeconds) };
  if (error instanceof MethodNotAllowedError) return { allow: error.allow.join(", ") };
  return undefined;
}
