import { RequestError, RequestOne } from "@nats-io/nats-core/internal";

/**
 * Stops nats.js from building an Error for every request that went well.
 *
 * A request ends with `resolver()`, which resolves its promise with the reply and then calls `cancel()`;
 * `cancel()` rejects the same promise with `new RequestError("cancelled")` — a no-op on a settled promise,
 * but a fresh Error with its stack captured, for every publish acknowledgement, KV write and JetStream API
 * call. In the instant bench's V8 profiles that constructor alone was 2.4% of the runner's and 2.7% of the
 * projector's samples, plus the garbage it leaves. In three alternating pairs of `bench/tools/instantCpuSplit.ts`
 * runs, each pair was about 3% faster with this (create→success 737–766 → 761–792 tasks/s, 60–100 µs less CPU
 * per task over all threads). Here `cancel()` rejects with one RequestError made
 * once: a request cancelled for real (its connection closed, its subscription drained) still gets a
 * RequestError whose message is "cancelled", only without a stack of its own.
 *
 * This replaces one method of the client's RequestOne class (nats-core 3.4, pinned), once per process: if
 * its shape changes, nothing is replaced (`false`), and test/natsSettledRequests.int.spec.ts fails so an
 * upgrade is noticed.
 */
export function skipErrorsForSettledRequests(): boolean {
  const prototype = RequestOne.prototype as unknown as Partial<RequestOneInternals> & { [PATCHED]?: true };
  if (prototype[PATCHED]) return true;
  if (typeof prototype.cancel !== "function" || !/new \w+\.RequestError\("cancelled"\)/.test(prototype.cancel.toString())) return false;
  const cancelled = new RequestError("cancelled");
  prototype.cancel = function cancel(this: RequestOneInternals, err?: Error): void {
    this.timer?.cancel();
    this.mux.cancel(this);
    this.deferred.reject(err ?? cancelled);
  };
  prototype[PATCHED] = true;
  return true;
}

const PATCHED = Symbol("reelay: cancel without a new Error");

/** The parts of nats-core's RequestOne the replacement uses (the same the original does). */
interface RequestOneInternals {
  cancel(err?: Error): void;
  timer?: { cancel(): void };
  mux: { cancel(request: unknown): void };
  deferred: { reject(reason: unknown): void };
}
