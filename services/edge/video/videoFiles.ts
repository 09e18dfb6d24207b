import type { ObjectStore } from "@nats-io/obj";
import { NotFoundError, ServiceUnavailableError } from "../../shared/errors.ts";
import { Semaphore } from "../../shared/semaphore.ts";
import { SingleFlight } from "../../shared/singleFlight.ts";
import type { HttpReply } from "../http/reply.ts";
import { replyRoute, type TableRoute } from "../http/routeTable.ts";
import { VIDEO_API } from "../../../contracts/videoApi.ts";
import { decideRange } from "./byteRange.ts";
import { REFERENCE_NAME, SERVABLE_VIDEO_NAME } from "../../../contracts/storedObjects.ts";

/** Stills made from a stored video (openaiVideos/videoVariants.ts), served only through the content endpoint. */
export const STILL_NAME = /^(thumb|sprite)-[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}\.(webp|jpg)$/;
const CONTENT_TYPES: Record<string, string> = { mp4: "video/mp4", png: "image/png", jpg: "image/jpeg", gif: "image/gif", webp: "image/webp" };

function nameFromUrl(url: string, prefix: string): string {
  try {
    return decodeURIComponent(url.slice(prefix.length).split("?", 1)[0] ?? "");
  } catch {
    throw new NotFoundError("malformed video name");
  }
}

const CACHE_BYTES = 256 * 1024 * 1024;

/**
 * Reads of stored files one at a time per edge. The object store sends a file through a push consumer that may
 * have 32 MB in flight (nats-server's JsFlowControlMaxPending), on the edge's one NATS connection, and the
 * server cuts off a connection with more than 64 MB waiting for it (max_pending): six requests for three 20 MB
 * videos that were not cached got the edge disconnected as a slow consumer, every tenant's calls on it failed,
 * and the reads never ended. One read at a time keeps that under half the limit.
 */
export const STORE_READS_AT_ONCE = 1;
/** A read that brings no chunk for this long is given up (503): after a reconnect its consumer is gone for good. */
const READ_STALL_MS = 10_000;

/** The stream's next chunk, or a 503 when none comes within `stallMs`. */
async function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, name: string, stallMs: number): Promise<ReadableStreamReadResult<Uint8Array>> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ServiceUnavailableError(`video ${name} could not be read from the store in time; try again`)), stallMs);
  });
  try {
    return await Promise.race([reader.read(), stalled]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Caches (browsers, CDNs) may keep a file but must ask again before each use: a video can be deleted, and
 * a deleted one must not be served from anywhere. The ETag makes asking again cheap (a 304, no body).
 */
const CACHE_CONTROL = "public, no-cache";

interface CachedFile {
  body: Buffer;
  /** The object store's digest of the body, which is also its ETag. */
  digest: string;
}

/**
 * Serves rendered videos from the object store at /videos/<name> (uploaded references, from theirs, at
 * /references/<name>). Names carry a random part, so the
 * address itself is the capability (like a vendor's signed URL). Bodies are cached in memory, bounded
 * by size, because players fetch the same file in many Range requests; every request still asks the
 * store whether the file exists and is the same (one small read), so a video deleted through any edge
 * is gone from all of them at once.
 */
export class VideoFiles {
  private readonly cache = new Map<string, CachedFile>();
  private cachedBytes = 0;
  /** Requests for a file being read share that read. */
  private readonly reads = new SingleFlight<CachedFile>();

  /** `storeReads` is shared by every VideoFiles on one NATS connection (videos and references). */
  constructor(
    private readonly videos: ObjectStore,
    private readonly storeReads: Semaphore,
    private readonly options: { stallMs: number } = { stallMs: READ_STALL_MS },
  ) {}

  /** GET, and HEAD through it (the router's; node:http sends the headers of the GET answer without its body). */
  routes(kind: "videos" | "references"): TableRoute[] {
    const [contract, prefix, names] = kind === "videos" ? [VIDEO_API.video, "/videos/", SERVABLE_VIDEO_NAME] : [VIDEO_API.reference, "/references/", REFERENCE_NAME];
    return replyRoute(contract, ({ request }) => this.serve(nameFromUrl(request.url, prefix), request.header("range"), names, request.header("if-none-match")));
  }

  /** A stored file, whole or the requested byte range; 304 when the client's copy (`If-None-Match`) is current. */
  async serve(name: string, rangeHeader: string, names: RegExp = SERVABLE_VIDEO_NAME, ifNoneMatch = ""): Promise<HttpReply> {
    const { body, digest } = await this.load(name, names);
    const size = body.length;
    const contentType = CONTENT_TYPES[name.slice(name.lastIndexOf(".") + 1)] ?? "application/octet-stream";
    const etag = `"${digest}"`;
    // nosniff: a browser shows the file as the type it is served with, never as a page of reelay's origin.
    const common = { "content-type": contentType, "x-content-type-options": "nosniff", "accept-ranges": "bytes", "cache-control": CACHE_CONTROL, etag };
    if (ifNoneMatch.split(",").some((tag) => tag.trim() === etag || tag.trim() === "*")) return { status: 304, headers: { "cache-control": CACHE_CONTROL, etag } };
    const range = decideRange(rangeHeader, size);
    if (range.kind === "unsatisfiable") {
      return { status: 416, headers: { ...common, "content-range": `bytes */${size}` }, body: "" };
    }
    const [status, start, end] = range.kind === "partial" ? [206, range.start, range.end] : [200, 0, size - 1];
    const headers = range.kind === "partial" ? { ...common, "content-range": `bytes ${start}-${end}/${size}` } : common;
    return { status, headers, body: body.subarray(start, end + 1) };
  }

  /** A stored file's bytes (404 when there is none by that name). */
  async bytesOf(name: string, names: RegExp = SERVABLE_VIDEO_NAME): Promise<Buffer> {
    return (await this.load(name, names)).body;
  }

  private async load(name: string, names: RegExp): Promise<CachedFile> {
    const info = names.test(name) ? await this.videos.info(name) : null;
    if (!info || info.deleted) {
      this.forget(name);
      throw new NotFoundError(`no video named ${name}`);
    }
    const cached = this.cache.get(name);
    if (cached?.digest === info.digest) return cached;
    return this.reads.run(`${name}\n${info.digest}`, () => this.storeReads.run(() => this.read(name)));
  }

  /** The whole file from the store, remembered when it fits the cache. */
  private async read(name: string): Promise<CachedFile> {
    const result = await this.videos.get(name);
    if (!result) throw new NotFoundError(`no video named ${name}`);
    // A read that failed is answered from the stream's error below; this one must not also go unhandled.
    result.error.catch(() => undefined);
    const chunks: Uint8Array[] = [];
    const reader = result.data.getReader();
    try {
      const next = () => readWithin(reader, name, this.options.stallMs);
      for (let read = await next(); !read.done; read = await next()) chunks.push(read.value);
    } catch (error) {
      await reader.cancel().catch(() => undefined);
      throw error;
    }
    if (await result.error) throw new NotFoundError(`video ${name} could not be read`);
    const file = { body: Buffer.concat(chunks), digest: result.info.digest };
    this.remember(name, file);
    return file;
  }

  /** Forgets a file that was deleted from the store (other edges forget it at its next request). */
  forget(name: string): void {
    const file = this.cache.get(name);
    if (!file) return;
    this.cache.delete(name);
    this.cachedBytes -= file.body.length;
  }

  private remember(name: string, file: CachedFile): void {
    this.forget(name);
    this.cache.set(name, file);
    this.cachedBytes += file.body.length;
    for (const [oldName, old] of this.cache) {
      if (this.cachedBytes <= CACHE_BYTES) break;
      this.cache.delete(oldName);
      this.cachedBytes -= old.body.length;
    }
  }
}
