/**
 * A signal that aborts when `parent` does or after `ms`, and is released with `dispose()`.
 * `AbortSignal.timeout` and `AbortSignal.any` can't be released: each keeps its timer (here up to a
 * task's whole deadline) and its link to the parent until they fire, so calling them for every upstream
 * call of thousands of live tasks piles up timers and listeners without bound.
 */
export function scopedSignal(parent: AbortSignal, ms: number): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const abort = () => controller.abort(parent.reason);
  if (parent.aborted) abort();
  else parent.addEventListener("abort", abort, { once: true });
  const timer = setTimeout(() => controller.abort(new DOMException("the call took too long", "TimeoutError")), Math.max(0, ms));
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      parent.removeEventListener("abort", abort);
    },
  };
}

/** Runs `call` with a scoped signal and releases it afterwards. */
export async function withSignal<T>(parent: AbortSignal, ms: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const scoped = scopedSignal(parent, ms);
  try {
    return await call(scoped.signal);
  } finally {
    scoped.dispose();
  }
}
