import { setTimeout as sleep } from "node:timers/promises";
import type { ProviderPolicy } from "./providerPolicy.ts";

/**
 * A provider's limits in one runner: at most `maxInFlight` tasks at the upstream (a slot is held from
 * submit until the task is final or handed over) and at most `submitsPerSecond` submits. Waiters are
 * served in arrival order.
 */
export class ProviderGate {
  private inFlight = 0;
  private readonly waiting: Array<() => void> = [];
  private nextSubmitAt = 0;

  constructor(private readonly policy: ProviderPolicy) {}

  /** Resolves with a release function once a slot is free. */
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (this.inFlight >= this.policy.maxInFlight) {
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          signal.removeEventListener("abort", abort);
          resolve();
        };
        const abort = () => {
          this.waiting.splice(this.waiting.indexOf(wake), 1);
          reject(signal.reason);
        };
        this.waiting.push(wake);
        signal.addEventListener("abort", abort, { once: true });
      });
    } else {
      this.inFlight++;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter: in-flight stays the same.
      if (next) next();
      else this.inFlight--;
    };
  }

  /** Waits for this submit's turn under `submitsPerSecond`. */
  async submitTurn(signal: AbortSignal): Promise<void> {
    if (this.policy.submitsPerSecond <= 0) return;
    const now = Date.now();
    const at = Math.max(now, this.nextSubmitAt);
    this.nextSubmitAt = at + 1000 / this.policy.submitsPerSecond;
    if (at > now) await sleep(at - now, undefined, { signal });
  }
}
