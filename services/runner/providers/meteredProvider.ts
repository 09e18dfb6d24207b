import type { HotCounterChild, HotHistogramChild } from "../../shared/metrics/hotMetrics.ts";
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
  const spanOptions = { kind: SpanKind.CLIENT, attributes: { "reelay.provider": name } };
  const measure = <T>(operation: Operation, call: () => Promise<T>): Promise<T> => inSpan(`provider ${operation}`, spanOptions, () => timed(operation, call));
  // Resolved once per operation: the meters of a call are then two additions and a bucket search.
  const meters = new Map<Operation, { duration: HotHistogramChild; ok: HotCounterChild }>();
  const metersOf = (operation: Operation) => {
    let found = meters.get(operation);
    if (!found) {
      found = { duration: upstreamCallDuration.labels({ provider: name, operation }), ok: upstreamCalls.labels({ provider: name, operation, outcome: "ok" }) };
      meters.set(operation, found);
    }
    return found;
  };
  const timed = async <T>(operation: Operation, call: () => Promise<T>): Promise<T> => {
    const { duration, ok } = metersOf(operation);
    const started = performance.now();
    try {
      const result = await call();
      ok.inc();
      return result;
    } catch (error) {
      upstreamCalls.labels({ provider: name, operation, outcome: outcomeOf(error) }).inc();
      throw error;
    } finally {
      duration.observe((performance.now() - started) / 1000);
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
