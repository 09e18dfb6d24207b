import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { open, unlink, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";

/** One read of a file sent to a client: what an answer holds in memory, however slow its client. */
const READ_CHUNK_BYTES = 64 * 1024;

interface Entry {
  readonly digest: string;
  readonly size: number;
  readonly handle: FileHandle;
  /** Leases out (answers being sent, copies being made): the file is not dropped under them. */
  leases: number;
  /** Out of the cache: its handle closes when its last lease ends. */
  dropped: boolean;
}

/**
 * Files kept on the edge's disk, each by name and digest, to be sent in ranges as clients take them. A file is
 * unlinked as soon as it is opened, so its bytes live only as long as its handle: nothing is left behind by a
 * process that dies, however it dies. The files not being read are kept within `budgetBytes`, least recently
 * used dropped first; a file being read stays until its last reader is done (once, however many read it).
 */
export class DiskFileCache {
  /** Oldest use first (a use moves a file to the end). */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  /** Cleared for good (the edge stopped): a read still under way then keeps nothing. */
  private cleared = false;

  constructor(
    private readonly budgetBytes: number,
    private readonly dir: string = tmpdir(),
  ) {}

  /** Bytes of the files kept (those being read included). */
  get keptBytes(): number {
    return this.bytes;
  }

  /** The file by this name with this digest, leased until the lease ends; undefined when it is not kept. */
  lease(name: string, digest: string): FileLease | undefined {
    const entry = this.entries.get(name);
    if (entry?.digest !== digest) return undefined;
    this.entries.delete(name);
    this.entries.set(name, entry);
    entry.leases++;
    return new FileLease(entry.size, entry.handle, () => this.endLease(entry));
  }

  /** Writes a file from the chunks `fill` hands to `append`, in order, and keeps it; nothing is kept when `fill` throws. */
  async keep(name: string, digest: string, fill: (append: (chunk: Uint8Array) => Promise<void>) => Promise<void>): Promise<void> {
    const path = join(this.dir, `reelay-file-${randomUUID()}`);
    const handle = await open(path, "wx+", 0o600);
    let size = 0;
    try {
      await unlink(path);
      await fill(async (chunk) => {
        for (let written = 0; written < chunk.length; ) {
          const { bytesWritten } = await handle.write(chunk, written, chunk.length - written, size + written);
          written += bytesWritten;
        }
        size += chunk.length;
      });
    } catch (error) {
      await handle.close();
      throw error;
    }
    if (this.cleared) {
      await handle.close();
      return;
    }
    this.forget(name);
    const entry: Entry = { digest, size, handle, leases: 0, dropped: false };
    this.entries.set(name, entry);
    this.bytes += size;
    this.trim(entry);
  }

  /** Drops the file by this name (deleted from the store): the next request reads the store again. */
  forget(name: string): void {
    const entry = this.entries.get(name);
    if (!entry) return;
    this.entries.delete(name);
    this.drop(entry);
  }

  /**
   * Drops every file for good (the edge stops): each handle closes now, or when its last reader is done, and a
   * read still under way keeps nothing. A handle left open is closed only when it is garbage collected, and
   * until then its unlinked file keeps its disk space.
   */
  clear(): void {
    this.cleared = true;
    for (const name of [...this.entries.keys()]) this.forget(name);
  }

  /** Drops least recently used files no one is reading until the rest fits; `spare` (just written, not yet leased) stays. */
  private trim(spare?: Entry): void {
    for (const [name, entry] of this.entries) {
      if (this.bytes <= this.budgetBytes) return;
      if (entry === spare || entry.leases > 0) continue;
      this.entries.delete(name);
      this.drop(entry);
    }
  }

  private drop(entry: Entry): void {
    this.bytes -= entry.size;
    entry.dropped = true;
    if (entry.leases === 0) void entry.handle.close().catch(() => undefined);
  }

  private endLease(entry: Entry): void {
    entry.leases--;
    if (entry.leases > 0) return;
    if (entry.dropped) void entry.handle.close().catch(() => undefined);
    else this.trim();
  }
}

/** A kept file, held open for one user: a stream of a range of it, or the file's bytes; `end()` when not used. */
export class FileLease {
  private ended = false;

  constructor(
    readonly size: number,
    private readonly handle: FileHandle,
    private readonly onEnd: () => void,
  ) {}

  /** Bytes `start` to `end` (inclusive) as they are read; the lease ends with the stream, however it ends. */
  stream(start: number, end: number): Readable {
    const stream = new FileRangeStream(this.handle, start, end);
    stream.once("end", () => this.end());
    stream.once("close", () => this.end());
    return stream;
  }

  /** Copies the whole file to a new file at `path` (ffmpeg's input for a still), a read at a time; the lease ends with it. */
  copyTo(path: string): Promise<void> {
    return pipeline(this.stream(0, this.size - 1), createWriteStream(path, { flags: "wx", mode: 0o600 }));
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd();
  }
}

/**
 * A byte range of a file read from a handle other answers share. Node's own file streams close their file
 * descriptor when destroyed (a client hanging up), even with `autoClose: false` (Node 20, 22 and 24), which
 * would end every other answer of that file. A handle's `close()` waits for reads under way, so a stream
 * destroyed mid-read leaves nothing behind.
 */
class FileRangeStream extends Readable {
  private position: number;

  constructor(
    private readonly handle: FileHandle,
    start: number,
    private readonly end: number,
  ) {
    super({ highWaterMark: READ_CHUNK_BYTES });
    this.position = start;
  }

  override _read(size: number): void {
    const length = Math.min(size, READ_CHUNK_BYTES, this.end + 1 - this.position);
    if (length <= 0) {
      this.push(null);
      return;
    }
    this.handle.read(Buffer.allocUnsafe(length), 0, length, this.position).then(
      ({ bytesRead, buffer }) => {
        if (bytesRead === 0) return this.destroy(new Error(`a kept file ended at byte ${this.position}`));
        this.position += bytesRead;
        this.push(buffer.subarray(0, bytesRead));
      },
      (error: unknown) => this.destroy(error instanceof Error ? error : new Error(String(error))),
    );
  }
}
