import { setTimeout as sleep } from "node:timers/promises";

/** The longest pause between two tries of a write that keeps failing (NATS down, a leader being elected). */
const MAX_RETRY_PAUSE_MS = 5_000;

/**
 * How long to wait before try `attempt` + 1 of a write that must eventually be kept (a reactor's batch, a
 * written-behind read model, a settlement): 100 ms doubling each time, at most 5 s.
 */
export const retryPauseMs = (attempt: number): number => Math.min(MAX_RETRY_PAUSE_MS, 100 * 2 ** attempt);

/**
 * Runs `work` until it succeeds, `failed` told of each failure and a `retryPauseMs` pause after it. Once
 * `stopping` is aborted no try follows: the last failure is thrown (what was not kept is handed over again,
 * as after a crash).
 */
export async function tryUntilStopped<T>(work: () => Promise<T>, stopping: AbortSignal, failed: (error: unknown, attempt: number) => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (stopping.aborted) throw error;
      failed(error, attempt);
      await sleep(retryPauseMs(attempt), undefined, { signal: stopping }).catch(() => undefined);
      if (stopping.aborted) throw error;
    }
  }
}
