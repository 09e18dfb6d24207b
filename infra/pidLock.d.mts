// Types of infra/pidLock.mjs.
export function withPidLock<T>(path: string | URL, options: { staleAfterMs: number; pollMs: number; onWait?: () => void }, work: () => Promise<T>): Promise<T>;
