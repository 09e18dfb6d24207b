import type { ReelayConfig } from "../../contracts/config.ts";
import type { ApiKeyDirectory } from "./auth.ts";
import { BodyBudget } from "./http/bodyBudget.ts";
import { bodyBytesToHold, type BodyGate } from "./http/bodyGate.ts";

/** The holder that requests without a key (vendor callbacks) share: together they get one account's part. */
const WITHOUT_KEY = "(no key)";

/**
 * The edge's gate for request bodies: a keyed route's caller shows a key this edge knows before a byte of the
 * body is read (a client without one held up to 10 MB of the edge's memory per request, for as long as the
 * request timeout let it send), then the body's room is held in the edge's budget under the key's account.
 */
export function bodyAdmission(keys: ApiKeyDirectory, limits: ReelayConfig["limits"]): BodyGate {
  const budget = new BodyBudget({ totalBytes: limits.bodyBytesInFlight, perHolderBytes: limits.bodyBytesInFlightPerAccount });
  return (request, maxBytes, keyed) => {
    const bytes = bodyBytesToHold(request, maxBytes);
    if (!keyed) return budget.hold(WITHOUT_KEY, bytes);
    const key = keys.identify(request.header("authorization"));
    return key instanceof Promise ? key.then((record) => budget.hold(record.account, bytes)) : budget.hold(key.account, bytes);
  };
}
