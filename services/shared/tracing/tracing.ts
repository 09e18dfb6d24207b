import { context, INVALID_SPAN_CONTEXT, propagation, SpanKind, SpanStatusCode, trace, type Context, type Span } from "@opentelemetry/api";

/**
 * Traces with OpenTelemetry. Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set:
 * then nothing is registered and every call below goes to the API's no-op tracer, which costs next to
 * nothing. On: spans are batched and exported over OTLP/HTTP; the exporter reads the standard OTEL_*
 * variables (endpoint, headers, timeouts) itself.
 */
export const tracer = trace.getTracer("reelay");

/** The SDK is loaded only when tracing is on: every process (and CLI call) would otherwise pay for loading it. */
let provider: { shutdown(): Promise<void> } | undefined;

/** The span `work` gets while tracing is off: the API's non-recording span, made once. */
const NO_SPAN: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** Whether this thread exports spans (startTracing found an endpoint). */
export const tracingOn = (): boolean => provider !== undefined;

export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** Once per thread (each service thread exports its own spans). `part`: edge, runner, projector or main. */
export async function startTracing(part: string): Promise<void> {
  if (provider || !tracingConfigured()) return;
  const [{ AsyncLocalStorageContextManager }, { W3CTraceContextPropagator }, { OTLPTraceExporter }, { resourceFromAttributes }, { BatchSpanProcessor, TracerProvider }] =
    await Promise.all([
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/core"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/sdk-trace"),
    ]);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const tracerProvider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": process.env.OTEL_SERVICE_NAME ?? "reelay", "reelay.thread": part }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter(), ...scheduledDelay() })],
  });
  trace.setGlobalTracerProvider(tracerProvider);
  provider = tracerProvider;
}

/** OTEL_BSP_SCHEDULE_DELAY (the standard variable; this SDK line does not read it itself). */
function scheduledDelay(): { scheduledDelayMillis?: number } {
  const ms = Number(process.env.OTEL_BSP_SCHEDULE_DELAY);
  return Number.isInteger(ms) && ms > 0 ? { scheduledDelayMillis: ms } : {};
}

/** Exports what is still batched (on shutdown). */
export async function stopTracing(): Promise<void> {
  await provider?.shutdown().catch(() => undefined);
}

type SpanOptions = { kind?: SpanKind; parent?: Context; attributes?: Record<string, string | number> };

/**
 * Runs `work` in a new span (a child of `parent`, or of the active span), ends it when `work` settles,
 * and marks it failed when `work` throws.
 */
export function inSpan<T>(name: string, options: SpanOptions, work: (span: Span) => Promise<T>): Promise<T> {
  // Tracing off: no span to start and no context to enter (that was 7% of a runner's CPU, for nothing).
  if (!provider) return work(NO_SPAN);
  const { span, within } = openSpan(name, options);
  return context.with(within, async () => {
    try {
      return await work(span);
    } catch (error) {
      markFailed(span, error as Error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** A new span (a child of `parent`, or of the active span) and the context its work runs in. */
function openSpan(name: string, options: SpanOptions): { span: Span; within: Context } {
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, ...(options.attributes ? { attributes: options.attributes } : {}) }, parent);
  return { span, within: trace.setSpan(parent, span) };
}

function markFailed(span: Span, error: Error): void {
  span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

/** A span over work done in separate pieces (a task that sleeps between polls holds no call chain meanwhile). */
export interface PiecewiseSpan {
  /** Runs one piece of the work in the span's context (calls and appends in it become its children). */
  run<T>(piece: () => Promise<T>): Promise<T>;
  /** Ends the span, marked failed when `error` is given. */
  end(error?: Error): void;
}

const NO_PIECEWISE_SPAN: PiecewiseSpan = { run: (piece) => piece(), end: () => undefined };

/** Starts a span whose work runs in pieces (see `PiecewiseSpan`); the caller ends it. */
export function startPiecewiseSpan(name: string, options: SpanOptions): PiecewiseSpan {
  if (!provider) return NO_PIECEWISE_SPAN;
  const { span, within } = openSpan(name, options);
  return {
    run: (piece) => context.with(within, piece),
    end: (error) => {
      if (error) markFailed(span, error);
      span.end();
    },
  };
}

/** The context a W3C `traceparent` (and `tracestate`) header names; the active one when absent. */
export function contextFromTraceparent(traceparent: string | undefined, tracestate?: string): Context {
  if (!traceparent) return context.active();
  return propagation.extract(context.active(), { traceparent, ...(tracestate ? { tracestate } : {}) });
}

/** The active span's ids, for log lines (empty when there is none or tracing is off). */
export function activeTraceIds(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

export { SpanKind };
