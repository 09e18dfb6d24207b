import { upstreamCallDuration, upstreamCalls } from "../../shared/metrics/metrics.ts";
import { inSpan, SpanKind } from "../../shared/tracing/tracing.ts";
import { ProviderMisconfigured, ProviderRejected, ProviderUnavailable, UpstreamLost, type VideoProvider } from "./types.ts";

type Operation = "submit" | "status" | "cancel" | "find" | "restart" | "forget";

const outcomeOf = (error: unknown): string =>
  error instanceof ProviderRejected
    ? "rejected"
    : error instanceof ProviderUnavailable
      ? "unavailable"
      : error instanceof ProviderMisconfigured
        ? "misconfigured"
        : error instanceof UpstreamLost
          ? "lost"
          : "error";

/**
 * Wraps a provider so every upstream call is counted, timed and traced under the provider entry's name (its
 * channel), whatever the adapter: adapters stay pure translation, the runner owns the measuring.
 */
export function meteredProvider(name: string, provider: VideoProvider): VideoProvider {
  const spanOptions = { kind: SpanKind.CLIENT, attributes: { "reelay.provider": name } };
  const measure = <T>(operation: Operation, call: () => Promise<T>): Promise<T> => inSpan(`provider ${operation}`, spanOptions, () => timed(operation, call));
  // Hot metrics keep each label set's child: a call's meters are a lookup, two additions and a bucket search.
  const timed = async <T>(operation: Operation, call: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    let outcome = "ok";
    try {
      return await call();
    } catch (error) {
      outcome = outcomeOf(error);
      throw error;
    } finally {
      upstreamCalls.labels({ provider: name, operation, outcome }).inc();
      upstreamCallDuration.labels({ provider: name, operation }).observe((performance.now() - started) / 1000);
    }
  };
  const { cancel, findByClientReference, restart, forget } = provider;
  return {
    policy: provider.policy,
    submit: (task) => measure("submit", () => provider.submit(task)),
    status: (task) => measure("status", () => provider.status(task)),
    ...(cancel ? { cancel: (task) => measure("cancel", () => cancel.call(provider, task)) } : {}),
    ...(findByClientReference ? { findByClientReference: (task) => measure("find", () => findByClientReference.call(provider, task)) } : {}),
    ...(restart ? { restart: (task) => measure("restart", () => restart.call(provider, task)) } : {}),
    ...(forget ? { forget: (task) => measure("forget", () => forget.call(provider, task)) } : {}),
    close: () => provider.close(),
  };
}
