import { randomUUID } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fetch, type Dispatcher, type Response } from "undici";
import { IMAGE_FORMATS_TEXT, sniffImage } from "../../../shared/imageKind.ts";
import { BlockedAddressError } from "../../../shared/publicAddressGuard.ts";
import { RenderFailure } from "./renderFailure.ts";

const MAX_REDIRECTS = 5;
/** Every customer-facing reason of a fetch starts so: the field, then what went wrong with it. */
const CANNOT_FETCH = "could not fetch image_url";

/**
 * Copies a reference image from an http(s) or data: URL into `dir` and returns the file path. Only what
 * we decode ourselves gets through: at most `maxBytes`, and a PNG, JPEG, GIF or WebP by its first bytes
 * (never a playlist or any other text that could name further files), named by that format.
 * Failures are RenderFailures: a reason for the customer, the network detail for operators.
 * `dispatcher` decides where connections may go (the public-only one unless private addresses are allowed);
 * it sees every redirect hop, since each is requested here.
 */
export async function fetchReference(url: string, dir: string, maxBytes: number, signal?: AbortSignal, dispatcher?: Dispatcher): Promise<string> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RenderFailure(`${CANNOT_FETCH}: not a valid URL`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:" && parsed.protocol !== "data:") {
    throw new RenderFailure(`${CANNOT_FETCH}: unsupported URL scheme "${parsed.protocol}" (use http, https or data)`);
  }
  // Never echo a data: URL (it is the payload) or a query string (may hold tokens) into errors.
  const where = parsed.protocol === "data:" ? "data: URL" : parsed.origin;

  let res: Response;
  // Redirects are followed by hand so that every hop is a request of its own through `dispatcher`.
  let target = parsed;
  for (let hop = 0; ; hop++) {
    try {
      res = await fetch(target, { signal: signal ?? null, redirect: "manual", ...(dispatcher ? { dispatcher } : {}) });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      // Which address was refused is the customer's to know (their URL pointed there); other causes are ours.
      if (err instanceof Error && err.cause instanceof BlockedAddressError) throw new RenderFailure(`${CANNOT_FETCH}: ${err.cause.message}`);
      throw new RenderFailure(`${CANNOT_FETCH}: ${where} could not be reached`, errorText(err));
    }
    const location = res.status >= 300 && res.status < 400 ? res.headers.get("location") : null;
    if (location === null) break;
    await res.body?.cancel();
    if (hop >= MAX_REDIRECTS) throw new RenderFailure(`${CANNOT_FETCH}: more than ${MAX_REDIRECTS} redirects from ${where}`);
    target = new URL(location, target);
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new RenderFailure(`${CANNOT_FETCH}: ${where} answered HTTP ${res.status}`);
  }
  const tooLarge = (): Error => new RenderFailure(`${CANNOT_FETCH}: the body from ${where} exceeds ${maxBytes} bytes`);
  if (Number(res.headers.get("content-length") ?? 0) > maxBytes) {
    await res.body?.cancel();
    throw tooLarge();
  }

  const chunks: Uint8Array[] = [];
  let total = 0;
  if (res.body) {
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) {
        await reader.cancel();
        throw tooLarge();
      }
      chunks.push(value);
    }
  }
  if (total === 0) throw new RenderFailure(`${CANNOT_FETCH}: ${where} returned an empty body`);

  const body = Buffer.concat(chunks);
  const kind = sniffImage(body);
  if (!kind) throw new RenderFailure(`image_url is not a ${IMAGE_FORMATS_TEXT} image`);
  await mkdir(dir, { recursive: true });
  const path = join(dir, `ref-${randomUUID()}${kind.extension}`);
  await writeFile(path, body, { flag: "wx" });
  return path;
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // undici hides the real reason (ECONNREFUSED, bad data: URL, …) in `cause`.
  return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
}
