import type { CallFailure } from "../../machines/liveTaskTypes.ts";
import { asServiceUnavailable } from "../shared/infrastructureErrors.ts";
import { ProviderMisconfigured, ProviderRejected, ProviderUnavailable, UpstreamLost } from "./providers/types.ts";
import { ResultGone, ResultUnusable } from "./resultCopy.ts";

/**
 * A failed call in the live task machine's terms. Our own infrastructure (a NATS write or read that timed out,
 * a closed connection) is told apart from the vendor's trouble: it must never count against a vendor channel.
 */
export function callFailureOf(error: unknown): CallFailure {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof ProviderRejected) return { kind: "rejected", message };
  if (error instanceof ProviderMisconfigured) return { kind: "misconfigured", message };
  if (error instanceof UpstreamLost) return { kind: "lost", message };
  if (error instanceof ResultGone) return { kind: "gone", message };
  if (error instanceof ResultUnusable) return { kind: "unusable", message };
  if (error instanceof ProviderUnavailable) {
    return { kind: "unavailable", message, refused: error.refused, ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }) };
  }
  if (asServiceUnavailable(error) !== undefined) return { kind: "infrastructure", message };
  return { kind: "passing", message };
}
