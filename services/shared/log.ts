import { pino, type Logger } from "pino";

export type { Logger };

/** One logger per service; API keys and Authorization headers never reach the log. */
export function createLogger(service: string): Logger {
  return pino({
    level: process.env.LOG_LEVEL ?? "info",
    base: { service },
    redact: {
      paths: ["key", "apiKey", "authorization", "headers.authorization", "req.headers.authorization", "*.key", "*.apiKey"],
      censor: "[redacted]",
    },
  });
}
