import { pino, type Logger } from "pino";
import { environment } from "./environment.ts";
import { activeTraceIds } from "./tracing/tracing.ts";

export type { Logger };

/** One logger per service; API keys and Authorization headers never reach the log. */
export function createLogger(service: string): Logger {
  return pino({
    level: environment().LOG_LEVEL,
    base: { service },
    // Every line written within a request's or a task's span names its trace (nothing when tracing is off).
    mixin: activeTraceIds,
    redact: {
      paths: ["key", "apiKey", "authorization", "headers.authorization", "req.headers.authorization", "*.key", "*.apiKey"],
      censor: "[redacted]",
    },
  });
}
