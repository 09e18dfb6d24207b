import { errors as undiciErrors, type Pool } from "undici";
import { upstreamPool } from "../../shared/upstreamPools.ts";
import { ProviderUnavailable } from "./types.ts";

/** Calling upstream HTTP APIs and reading their answers the same way in every adapter. */

/** The body as JSON, or undefined when it is not JSON (an error page, a truncated answer). */
export const parseJsonOrUndefined = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** The upstream's Retry-After (seconds or an HTTP date), in ms. */
export function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** An upstream's answer, read whole (task APIs answer a few KB). */
export interface UpstreamAnswer {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * One HTTP call to an upstream API with undici, bounded by `timeoutMs` for the answer's head and between
 * body chunks. A network failure or timeout is ProviderUnavailable (passing); an abort is rethrown as is.
 */
export async function callUpstream(
  url: string,
  options: { method: "GET" | "POST" | "DELETE"; headers: Record<string, string>; body: string | Buffer | null; signal: AbortSignal; timeoutMs: number; what: string },
): Promise<UpstreamAnswer> {
  let response: Awaited<ReturnType<Pool["request"]>>;
  try {
    const { origin, pathname, search } = new URL(url);
    response = await upstreamPool(origin).request({
      path: `${pathname}${search}`,
      method: options.method,
      headers: options.headers,
      body: options.body,
      signal: options.signal,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  } catch (error) {
    if (options.signal.aborted) throw error;
    const why = error instanceof undiciErrors.UndiciError ? error.code : (error as Error).message;
    throw new ProviderUnavailable(`${options.what}: ${why}`);
  }
  const text = await response.body.text().catch(() => "");
  return { status: response.statusCode, text, headers: response.headers };
}
