/** A provider's policy as data, read from its config entry (contracts/config.ts `providerPolicy`). */
export interface ProviderPolicy {
  pollFirstAfterMs: number;
  pollEveryMs: number;
  pollMaxEveryMs: number;
  maxInFlight: number;
  /** 0: no limit. */
  submitsPerSecond: number;
  timeoutMs: number;
}

export const policyOf = (settings: ProviderPolicy): ProviderPolicy => ({
  pollFirstAfterMs: settings.pollFirstAfterMs,
  pollEveryMs: settings.pollEveryMs,
  pollMaxEveryMs: settings.pollMaxEveryMs,
  maxInFlight: settings.maxInFlight,
  submitsPerSecond: settings.submitsPerSecond,
  timeoutMs: settings.timeoutMs,
});
