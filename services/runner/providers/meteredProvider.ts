import { upstreamCallDuration, upstreamCalls } from "../../shared/metrics/metrics.ts";
import { inSpan, SpanKind } from "../../shared/tracing/tracing.ts";
import { ProviderMisconfigured, ProviderRejected, ProviderUnavailable, type VideoProvider } from "./types.ts";

type Operation = "submit" | "status" | "cancel" | "find" | "forget";

const outcomeOf = (error: unknown): string =>
  error instanceof ProviderRejected
    ? "rejected"
    : error instanceof ProviderUnavailable
      ? "unavailable"
      : error instanceof ProviderMisconfigured
        ? "misconfigured"
        : "error";

/**
 * Wraps a provider so every upstream call is counted, timed and traced under the provider entry's name (its
 * channel), whatever the adapter: adapters stay pure translation, the runner owns the measuring.
 */
export function meteredProvider(name: string, provider: VideoProvider): VideoProvider {
  const measure = <T>(operation: Operation, call: () => Promise<T>): Promise<T> =>
    inSpan(`provider ${operation}`, { kind: SpanKind.CLIENT, attributes: { "reelay.provider": name } }, () => timed(operation, call));
  const timed = async <T>(operation: Operation, call: () => Promise<T>): Promise<T> => {
    const stop = upstreamCallDuration.startTimer({ provider: name, operation });
    try {
      const result = await call();
      upstreamCalls.inc({ provider: name, operation, outcome: "ok" });
      return result;
    } catch (error) {
      upstreamCalls.inc({ provider: name, operation, outcome: outcomeOf(error) });
      throw error;
    } finally {
      stop();
    }
  };
  const { cancel, findByClientReference, forget } = provider;
  return {
    policy: provider.policy,
    submit: (task) => measure("submit", () => provider.submit(task)),
    status: (task) => measure("status", () => provider.status(task)),
    ...(cancel ? { cancel: (task) => measure("cancel", () => cancel.call(provider, task)) } : {}),
    ...(findByClientReference ? { findByClientReference: (task) => measure("find", () => findByClientReference.call(provider, task)) } : {}),
    ...(forget ? { forget: (task) => measure("forget", () => forget.call(provider, task)) } : {}),
    close: () => provider.close(),
  };
}
