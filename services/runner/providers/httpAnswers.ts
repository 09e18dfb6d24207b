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
  return { status: response.statusCode, text: await answerText(response.body, options.what), headers: response.headers };
}

/**
 * The most of an upstream's answer read: task APIs answer a few KB, and a list a page of tasks. An upstream that
 * sent more (a broken proxy, a file where JSON was due) had it all held in the runner's memory.
 */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/** The answer's text, or "" when its body broke off (the adapter reads that as an unusable answer); too long: passing. */
async function answerText(body: AsyncIterable<Buffer> & { destroy(): void }, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      size += chunk.length;
      if (size > MAX_ANSWER_BYTES) {
        body.destroy();
        throw new ProviderUnavailable(`${what}: the upstream answered more than ${MAX_ANSWER_BYTES} bytes`);
      }
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof ProviderUnavailable) throw error;
    return "";
  }
  return Buffer.concat(chunks).toString("utf8");
}
