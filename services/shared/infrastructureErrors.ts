import { JetStreamApiError } from "@nats-io/jetstream";
import { ClosedConnectionError, ConnectionError, DrainingConnectionError, NoRespondersError, TimeoutError } from "@nats-io/transport-node";
import { ServiceUnavailableError } from "./errors.ts";

/**
 * Whether an error means "our own infrastructure could not do it right now" rather than "this request is
 * wrong" or "this code is broken": a NATS request or publish that timed out, a connection that is closed
 * or draining, JetStream that is not there or answers 503. Such failures answer 503 with Retry-After
 * (issue 8: they used to answer 500, which the spec reserves for a failed generation).
 */
function isInfrastructureFailure(error: unknown): boolean {
  if (error instanceof TimeoutError || error instanceof NoRespondersError) return true;
  if (error instanceof ClosedConnectionError || error instanceof DrainingConnectionError || error instanceof ConnectionError) return true;
  // 503 = "JetStream system temporarily unavailable" (no quorum, no JetStream on the server).
  if (error instanceof JetStreamApiError) return error.status === 503 || error.status === 408;
  // Not exported by @nats-io/jetstream, so matched by name.
  return error instanceof Error && error.name === "JetStreamNotEnabled";
}

const MAX_CAUSES = 5;

/** The 503 to answer when `error` (or one of its causes: NATS wraps them) is an infrastructure failure. */
export function asServiceUnavailable(error: unknown): ServiceUnavailableError | undefined {
  if (error instanceof ServiceUnavailableError) return error;
  let current = error;
  for (let depth = 0; depth < MAX_CAUSES && current instanceof Error; depth++) {
    if (isInfrastructureFailure(current)) {
      return new ServiceUnavailableError("service temporarily unavailable: try again shortly", 2, { cause: error });
    }
    current = current.cause;
  }
  return undefined;
}

/**
 * Whether a put into a JetStream store (an object store) was refused because the store is at its
 * `max_bytes` with discard-new. The server answers with a generic store-failure code whose only telling
 * part is its description, so that is what is matched, here only.
 */
export function isStoreFull(error: unknown): boolean {
  return error instanceof Error && /maximum bytes/i.test(error.message);
}
