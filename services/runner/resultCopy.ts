import { createReadStream } from "node:fs";
import type { Readable } from "node:stream";
import type { ObjectStore } from "@nats-io/obj";
import { request } from "undici";
import { SERVABLE_VIDEO_NAME } from "../../contracts/storedObjects.ts";
import type { StoredVideo } from "../../contracts/videoTask.ts";
import { BlockedAddressError, publicOnly } from "../shared/publicAddressGuard.ts";
import { isStoreFull } from "../shared/infrastructureErrors.ts";
import { putNewObject, type ObjectBucket } from "./newObject.ts";
import type { VideoResult } from "./providers/types.ts";

/** The result can never be copied (gone, not a video, too big): the task fails with this customer-readable reason. */
export class ResultUnusable extends Error {}

/** The address answered 403, 404 or 410: it expired or was withdrawn (an upstream may hand out a fresh one). */
export class ResultGone extends ResultUnusable {}

export interface ResultCopyOptions {
  videos: ObjectStore;
  /**
   * Set when the name cannot have been stored before (the task's first copy, by its first runner): the
   * object is written straight into this bucket, without the client's look-up of an older one (newObject.ts).
   */
  newIn?: ObjectBucket;
  maxBytes: number;
  /** Off only where tests serve results from loopback. */
  allowPrivateAddresses: boolean;
  signal: AbortSignal;
}

const DESCRIPTION = "video result";
const ACCEPTED_TYPES = /^(video\/mp4|video\/quicktime|application\/octet-stream|binary\/octet-stream)(;|$)/i;
const MAX_REDIRECTS = 5;

/** An MP4/QuickTime file has a box type `ftyp` at bytes 4–7. */
const looksLikeMp4 = (head: Uint8Array) => head.length >= 8 && Buffer.from(head.subarray(4, 8)).toString("latin1") === "ftyp";

/**
 * Copies a finished video into the object store as `name`, byte for byte (never re-encoded): streamed,
 * capped at `maxBytes`, checked to be an MP4, fetched from public addresses only (every redirect hop
 * too). Throws ResultUnusable when it never will work; anything else (a NATS hiccup, a dropped
 * connection) is passing, and the runner retries the copy until the task's deadline.
 */
export async function copyResult(result: VideoResult, name: string, options: ResultCopyOptions): Promise<StoredVideo> {
  // A task succeeds only with a copy its routes serve: a name they refuse is never stored (issue 32).
  if (!SERVABLE_VIDEO_NAME.test(name)) throw new ResultUnusable("reelay could not store the generated video under a servable name");
  const source: Readable = result.kind === "file" ? createReadStream(result.path) : await download(result.url, result.headers ?? {}, options);
  const guarded = guardedChunks(source, options.maxBytes);
  try {
    // A new object takes the chunks as they come; the client's put reads a web stream.
    const info = await (options.newIn
      ? putNewObject(options.newIn, name, DESCRIPTION, guarded.chunks)
      : options.videos.put({ name, description: DESCRIPTION }, webStreamOf(guarded.chunks))
    ).catch((error: unknown) => {
      // The store is at its max_bytes (discard new): this copy is refused, nothing stored is touched, and
      // waiting for the deadline would only hold the task; it fails now, free.
      if (isStoreFull(error)) throw new ResultUnusable("reelay's video store is full, so the video could not be kept; no charge was made");
      throw error;
    });
    if (!guarded.checked()) {
      await options.videos.delete(name);
      throw new ResultUnusable("the generated video is empty");
    }
    return { object: info.name, bytes: info.size, contentType: "video/mp4" };
  } finally {
    source.destroy();
  }
}

/** The video's chunks as they arrive, checked as they pass: an MP4 from the first chunk, at most `maxBytes` in all. */
function guardedChunks(source: Readable, maxBytes: number): { chunks: AsyncIterable<Uint8Array>; checked(): boolean } {
  let checked = false;
  async function* chunks(): AsyncGenerator<Uint8Array> {
    let bytes = 0;
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      if (!checked) {
        if (!looksLikeMp4(chunk)) throw new ResultUnusable("the generated video is not an MP4 file");
        checked = true;
      }
      bytes += chunk.byteLength;
      if (bytes > maxBytes) throw new ResultUnusable(`the generated video is larger than ${maxBytes} bytes`);
      yield chunk;
    }
  }
  return { chunks: chunks(), checked: () => checked };
}

/** Chunks as the web stream the object store client reads, pulled one at a time. */
function webStreamOf(chunks: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = chunks[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await iterator.next();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      async cancel() {
        await iterator.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}

async function download(address: string, headers: Record<string, string>, options: ResultCopyOptions): Promise<Readable> {
  let url = new URL(address);
  const origin = url.origin;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new ResultUnusable(`the video address uses ${url.protocol}, not http(s)`);
    // undici's request, not fetch: no Request/Response/Headers objects per call (redirects are not followed,
    // so each hop is a request of its own through the public-only dispatcher).
    const response = await request(url, { method: "GET", signal: options.signal, headers: url.origin === origin ? headers : {}, ...(options.allowPrivateAddresses ? {} : { dispatcher: publicOnly() }) }).catch(
      (error: unknown) => Promise.reject(error instanceof BlockedAddressError ? new ResultUnusable(error.message) : error),
    );
    const status = response.statusCode;
    const location = headerOf(response.headers, "location");
    if (status >= 300 && status < 400 && location) {
      await response.body.dump();
      url = new URL(location, url);
      continue;
    }
    if (status === 403 || status === 404 || status === 410) {
      await response.body.dump();
      throw new ResultGone(`the generated video is no longer available (HTTP ${status})`);
    }
    if (status < 200 || status >= 300) {
      await response.body.dump();
      throw new Error(`fetching the video answered HTTP ${status}`);
    }
    const type = headerOf(response.headers, "content-type") ?? "application/octet-stream";
    if (!ACCEPTED_TYPES.test(type)) {
      await response.body.dump();
      throw new ResultUnusable(`the generated video came as ${type.split(";")[0]}, not video/mp4`);
    }
    const declared = Number(headerOf(response.headers, "content-length"));
    if (Number.isFinite(declared) && declared > options.maxBytes) {
      await response.body.dump();
      throw new ResultUnusable(`the generated video is larger than ${options.maxBytes} bytes`);
    }
    return response.body;
  }
  throw new ResultUnusable(`the video address redirected more than ${MAX_REDIRECTS} times`);
}

const headerOf = (headers: Record<string, string | string[] | undefined>, name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};
