/** The longest pause between two tries of a write that keeps failing (NATS down, a leader being elected). */
const MAX_RETRY_PAUSE_MS = 5_000;

/**
 * How long to wait before try `attempt` + 1 of a write that must eventually be kept (a reactor's batch, a
 * written-behind read model, a settlement): 100 ms doubling each time, at most 5 s.
 */
export const retryPauseMs = (attempt: number): number => Math.min(MAX_RETRY_PAUSE_MS, 100 * 2 ** attempt);
