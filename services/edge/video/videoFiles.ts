import type { ObjectInfo, ObjectStore } from "@nats-io/obj";
import { NotFoundError, ServiceUnavailableError } from "../../shared/errors.ts";
import { Semaphore } from "../../shared/semaphore.ts";
import { SingleFlight } from "../../shared/singleFlight.ts";
import { lruOf } from "../../shared/lruOf.ts";
import { LocalBudget } from "../rateLimiter.ts";
import type { HttpReply } from "../http/reply.ts";
import { replyRoute, type TableRoute } from "../http/routeTable.ts";
import { VIDEO_API } from "../../../contracts/videoApi.ts";
import { decideRange } from "./byteRange.ts";
import { DiskFileCache, type FileLease } from "./diskFileCache.ts";
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
/** A client that takes no byte of a file for this long is cut off (its answer keeps the file on the edge's disk). */
const SEND_STALL_MS = 60_000;
/**
 * A name's entry in the store is asked for again after this; the requests in between (a player's Range requests)
 * share one look. Each look costs the shared nats-server 125-140 µs of CPU here (`bench/tools/hostileClients.ts
 * video-lookups`), and the route takes no key: every request looked before, so anyone could spend it at will.
 */
const INFO_FRESH_MS = 250;
/** Names found stored lately, whose next look takes nothing from the lookup budget: at most this many, for this long. */
const KNOWN_NAMES = 10_000;
const KNOWN_FOR_MS = 10 * 60_000;
/**
 * Looks of names an edge has not found stored lately, a second and at once: made-up names (any name of the
 * route's shape) cost a look each. A client past it is asked to try again shortly (503), as for unknown keys.
 */
export const DEFAULT_FILE_LOOKUPS = { perSecond: 200, burst: 400 } as const;

interface KnownFile {
  readonly info: ObjectInfo;
  /** performance.now() of the look that found it. */
  readonly lookedAt: number;
}

export interface VideoFilesOptions {
  /** Bytes of files kept on the edge's disk that no answer is reading (config `videos.edgeCacheBytes`). */
  keepBytes: number;
  /** Where they are kept (unlinked at once: nothing stays there); the system's temporary directory by default. */
  dir?: string;
  readStallMs?: number;
  sendStallMs?: number;
  /** Looks of names not found stored lately (shared by the videos and references of one edge); DEFAULT_FILE_LOOKUPS by default. */
  lookups?: LocalBudget;
  /** Bytes of files being sent the disk may hold beyond `keepBytes` (SENDING_ROOM_BYTES by default). */
  sendingRoomBytes?: number;
}

/**
 * Files being sent stay on the edge's disk past `keepBytes` until their last answer ends. A client that reads a
 * byte now and then (never still for the send stall) keeps its file there, and clients enough over as many
 * videos filled the disk; past this much more, a file not on the disk is refused (503) until room comes back.
 */
const SENDING_ROOM_BYTES = 1024 ** 3;

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

/**
 * Serves rendered videos from the object store at /videos/<name> (uploaded references, from theirs, at
 * /references/<name>). Names carry a random part, so the address itself is the capability (like a vendor's
 * signed URL). A file read from the store is kept on the edge's disk (players fetch one file in many Range
 * requests) and sent from there as each client takes it: an answer holds one read's worth of memory, so
 * clients that read slowly or not at all cannot fill the edge's memory (with the whole file in memory per
 * answer, 120 stalled requests for files the cache had let go held 1.4 GB). The store is asked whether the
 * file exists and is the same (one small read) at most every INFO_FRESH_MS per name, so a video deleted through
 * another edge is gone from this one within that (through this edge: at once); names this edge has not found
 * stored lately are looked up within the edge's lookup budget (see `VideoFilesOptions.lookups`).
 */
export class VideoFiles {
  private readonly kept: DiskFileCache;
  /** Requests for a file being read share that read. */
  private readonly reads = new SingleFlight<void>();
  private readonly readStallMs: number;
  private readonly sendStallMs: number;
  private readonly lookups: LocalBudget;
  /** The most bytes the disk holds: the budget and the room for files being sent. */
  private readonly diskBytes: number;
  private readonly known = lruOf<string, KnownFile>(KNOWN_NAMES, { ttl: KNOWN_FOR_MS });
  /** Requests for a name being looked up share that look. */
  private readonly looks = new SingleFlight<ObjectInfo | null>();

  /** `storeReads` is shared by every VideoFiles on one NATS connection (videos and references). */
  constructor(
    private readonly videos: ObjectStore,
    private readonly storeReads: Semaphore,
    options: VideoFilesOptions,
  ) {
    this.kept = new DiskFileCache(options.keepBytes, options.dir);
    this.readStallMs = options.readStallMs ?? READ_STALL_MS;
    this.sendStallMs = options.sendStallMs ?? SEND_STALL_MS;
    this.lookups = options.lookups ?? new LocalBudget(DEFAULT_FILE_LOOKUPS.perSecond, DEFAULT_FILE_LOOKUPS.burst);
    this.diskBytes = options.keepBytes + (options.sendingRoomBytes ?? SENDING_ROOM_BYTES);
  }

  /** Bytes of files kept on disk (those being sent included). */
  get keptBytes(): number {
    return this.kept.keptBytes;
  }

  /** Lets the kept files go (the edge stops); answers still being sent finish first. */
  close(): void {
    this.kept.clear();
  }

  /** GET, and HEAD through it (the router's; node:http sends the headers of the GET answer without its body). */
  routes(kind: "videos" | "references"): TableRoute[] {
    const [contract, prefix, names] = kind === "videos" ? [VIDEO_API.video, "/videos/", SERVABLE_VIDEO_NAME] : [VIDEO_API.reference, "/references/", REFERENCE_NAME];
    return replyRoute(contract, ({ request }) => this.serve(nameFromUrl(request.url, prefix), request.header("range"), names, request.header("if-none-match")));
  }

  /** A stored file, whole or the requested byte range; 304 when the client's copy (`If-None-Match`) is current. */
  async serve(name: string, rangeHeader: string, names: RegExp = SERVABLE_VIDEO_NAME, ifNoneMatch = ""): Promise<HttpReply> {
    const { lease, digest } = await this.load(name, names);
    const size = lease.size;
    const contentType = CONTENT_TYPES[name.slice(name.lastIndexOf(".") + 1)] ?? "application/octet-stream";
    const etag = `"${digest}"`;
    // nosniff: a browser shows the file as the type it is served with, never as a page of reelay's origin.
    const common = { "content-type": contentType, "x-content-type-options": "nosniff", "accept-ranges": "bytes", "cache-control": CACHE_CONTROL, etag };
    if (ifNoneMatch.split(",").some((tag) => tag.trim() === etag || tag.trim() === "*")) {
      lease.end();
      return { status: 304, headers: { "cache-control": CACHE_CONTROL, etag } };
    }
    const range = decideRange(rangeHeader, size);
    if (range.kind === "unsatisfiable") {
      lease.end();
      return { status: 416, headers: { ...common, "content-range": `bytes */${size}` }, body: "" };
    }
    const [status, start, end] = range.kind === "partial" ? [206, range.start, range.end] : [200, 0, size - 1];
    const headers = range.kind === "partial" ? { ...common, "content-range": `bytes ${start}-${end}/${size}` } : common;
    const file = { length: end + 1 - start, open: () => lease.stream(start, end), skip: () => lease.end(), stallMs: this.sendStallMs };
    return { status, headers, file };
  }

  /** Copies a stored video to `path` (ffmpeg's input for a still); 404 when there is none by that name. */
  async copyTo(name: string, path: string): Promise<void> {
    const { lease } = await this.load(name, SERVABLE_VIDEO_NAME);
    await lease.copyTo(path);
  }

  /** The file, leased from the disk (read from the store first when it is not kept there). */
  private async load(name: string, names: RegExp): Promise<{ lease: FileLease; digest: string }> {
    const info = names.test(name) ? await this.lookUp(name) : null;
    if (!info || info.deleted) {
      this.forget(name);
      throw new NotFoundError(`no video named ${name}`);
    }
    const { digest } = info;
    const kept = this.kept.lease(name, digest);
    if (kept) return { lease: kept, digest };
    await this.reads.run(`${name}\n${digest}`, () => this.storeReads.run(() => this.read(name, info.size)));
    // Every request that waited for the read resumes before any answer ends, so the file is kept for each of
    // them; the store may have had another file by the name by then (not one reelay writes: names are unique).
    const lease = this.kept.lease(name, digest);
    if (!lease) throw new ServiceUnavailableError(`video ${name} changed while it was read; try again`);
    return { lease, digest };
  }

  /** The store's entry for `name` (null: none), looked at most every INFO_FRESH_MS; a name not found lately within the budget. */
  private async lookUp(name: string): Promise<ObjectInfo | null> {
    const known = this.known.get(name);
    if (known && performance.now() - known.lookedAt < INFO_FRESH_MS) return known.info;
    return this.looks.run(name, async () => {
      if (!known && !this.lookups.take()) throw new ServiceUnavailableError("this edge is being asked for too many stored files it does not know; try again shortly", 1);
      const info = await this.videos.info(name);
      if (info && !info.deleted) this.known.set(name, { info, lookedAt: performance.now() });
      else this.known.delete(name);
      return info;
    });
  }

  /** The whole file from the store onto the disk, chunk by chunk, when the disk has room for it (reads run one at a time). */
  private async read(name: string, size: number): Promise<void> {
    // A file alone always gets in, however large.
    if (this.kept.keptBytes > 0 && this.kept.keptBytes + size > this.diskBytes) {
      throw new ServiceUnavailableError("this edge is sending more stored files than its disk has room for; try again shortly", 5);
    }
    const result = await this.videos.get(name);
    if (!result) throw new NotFoundError(`no video named ${name}`);
    // A read that failed is answered from the stream's error below; this one must not also go unhandled.
    result.error.catch(() => undefined);
    const reader = result.data.getReader();
    await this.kept.keep(name, result.info.digest, async (append) => {
      try {
        const next = () => readWithin(reader, name, this.readStallMs);
        for (let read = await next(); !read.done; read = await next()) await append(read.value);
      } catch (error) {
        await reader.cancel().catch(() => undefined);
        throw error;
      }
      if (await result.error) throw new NotFoundError(`video ${name} could not be read`);
    });
  }

  /** Forgets a file that was deleted from the store (other edges forget it at its next request). */
  forget(name: string): void {
    this.known.delete(name);
    this.kept.forget(name);
  }
}
