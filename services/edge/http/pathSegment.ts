import { ValidationError } from "../../shared/errors.ts";

/**
 * A path segment's percent-decoded text. A malformed escape (`%E0%A4%A`, a lone `%`) is the client's
 * mistake, a 400 naming it; `decodeURIComponent`'s URIError unhandled was a 500 on routes anyone may call.
 */
export function decodePathSegment(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new ValidationError(`${what} in the path is not valid percent-encoding: ${raw.slice(0, 100)}`);
  }
}
