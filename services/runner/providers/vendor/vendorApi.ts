import { z } from "zod";
import { callUpstream, parseJsonOrUndefined, retryAfterMs } from "../httpAnswers.ts";
import { ProviderMisconfigured, ProviderRejected, ProviderUnavailable } from "../types.ts";
import { requiredKey } from "./vendorModels.ts";

/** How the runner should take a vendor's error answer (each adapter decides on the vendor's own codes). */
export type ErrorClass = "rejected" | "moderation" | "misconfigured" | "unavailable" | "notFound";

/** A vendor's error answer in our words, with the vendor's code and message kept for operators. */
export interface VendorErrorReading {
  kind: ErrorClass;
  code: string;
  message: string;
}

/** An error answer from a vendor, classified. */
export class VendorCallError extends Error {
  constructor(
    readonly vendor: string,
    readonly reading: VendorErrorReading,
    readonly httpStatus: number,
    readonly retryAfterMs: number | undefined,
  ) {
    super(`HTTP ${httpStatus} ${reading.code}: ${reading.message}`);
  }
}

/** The credentials for every call; throws ProviderMisconfigured when a key variable is unset. */
export type Credentials = () => Record<string, string> | Promise<Record<string, string>>;

/**
 * Reads the vendor's error in an answer: every non-2xx one, and a 2xx one whose body says it failed (MiniMax
 * answers HTTP 200 with a non-zero `base_resp.status_code`). Undefined for a non-2xx: classified on the HTTP status.
 */
export type ErrorReader = (httpStatus: number, body: unknown) => VendorErrorReading | undefined;

/** `Authorization: Bearer <key>`, the key read from its variable at start. */
export const bearerKey =
  (key: string | undefined, variable: string): Credentials =>
  () => ({ authorization: `Bearer ${requiredKey(key, variable)}` });

/** The class an HTTP status alone suggests, for answers without a code the vendor documents. */
export function classOfHttpStatus(httpStatus: number): ErrorClass {
  if (httpStatus === 401 || httpStatus === 403) return "misconfigured";
  if (httpStatus === 408 || httpStatus === 409 || httpStatus === 425 || httpStatus === 429 || httpStatus >= 500) return "unavailable";
  if (httpStatus === 404) return "notFound";
  return "rejected";
}

type Method = "GET" | "POST" | "DELETE";

/** For calls whose answer body does not matter (a cancel). */
export const ANY_ANSWER = z.unknown();

/**
 * One vendor's JSON API: credentials on every call, the answer checked against the vendor's documented shape
 * (a shape it does not document is passing trouble, asked again), and errors read in the vendor's own codes.
 */
export class VendorApi {
  private readonly base: string;

  constructor(
    /** The vendor's name as operators read it in logs and errors. */
    private readonly vendor: string,
    private readonly settings: { baseUrl: string; timeoutMs: number },
    private readonly credentials: Credentials,
    private readonly readError: ErrorReader,
  ) {
    this.base = settings.baseUrl.replace(/\/+$/, "");
  }

  async call<T extends z.ZodType>(method: Method, path: string, signal: AbortSignal, schema: T, body?: object, headers: Record<string, string> = {}): Promise<z.infer<T>> {
    const { vendor, base } = this;
    const what = `${method} ${path.split("?")[0]}`;
    const answer = await callUpstream(`${base}${path}`, {
      method,
      headers: { ...(await this.credentials()), accept: "application/json", ...(body ? { "content-type": "application/json" } : {}), ...headers },
      body: body ? JSON.stringify(body) : null,
      signal,
      timeoutMs: this.settings.timeoutMs,
      what,
    });
    const json = parseJsonOrUndefined(answer.text);
    const ok = answer.status >= 200 && answer.status < 300;
    const reading = this.readError(answer.status, json);
    if (ok && reading === undefined) {
      const parsed = schema.safeParse(json);
      if (!parsed.success) throw new ProviderUnavailable(`${what}: ${vendor}'s answer is not what its API documents`);
      return parsed.data;
    }
    const fallback = { kind: classOfHttpStatus(answer.status), code: `HTTP ${answer.status}`, message: "" };
    throw new VendorCallError(vendor, reading ?? fallback, answer.status, retryAfterMs(answer.headers["retry-after"]));
  }
}

/** An error answer as the port's error: customer-readable where the customer will read it. */
export function portErrorOf(error: unknown): unknown {
  if (!(error instanceof VendorCallError)) return error;
  const { vendor, reading } = error;
  switch (reading.kind) {
    case "moderation":
      return new ProviderRejected("the request was refused by the upstream's content policy");
    case "misconfigured":
      return new ProviderMisconfigured(`${vendor} refused this channel (${reading.code}): ${reading.message}`);
    case "unavailable":
      return new ProviderUnavailable(`${vendor} is busy or failing (${reading.code})`, error.retryAfterMs, true);
    case "notFound":
      return new ProviderMisconfigured(`${vendor} has no such endpoint or model (${reading.code}): check baseUrl and upstreamModel`);
    case "rejected":
      return new ProviderRejected(`the upstream generator refused the task: ${reading.message || reading.code}`);
  }
}

/** Runs one call and answers with the port's errors. */
export async function asPortErrors<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw portErrorOf(error);
  }
}

/** The vendor no longer knows the task (past its retention, deleted): it will never finish. */
export const isUnknownTask = (error: unknown): error is VendorCallError => error instanceof VendorCallError && error.reading.kind === "notFound";

/** A cancel the vendor refuses (already running, already gone) is no trouble: cancelling is best effort. */
export async function cancelBestEffort(call: () => Promise<unknown>): Promise<void> {
  try {
    await call();
  } catch (error) {
    if (error instanceof VendorCallError && (error.reading.kind === "rejected" || error.reading.kind === "notFound")) return;
    throw portErrorOf(error);
  }
}
