import type { ResponseSink } from "../../services/edge/chat/responseSink.ts";

/**
 * A ResponseSink standing in for a uWS client, so a provider can be driven without an edge: it records
 * what reaches the client, can play a slow reader (`block()`: writes return false until `unblock()`
 * drains) and a client that leaves (`leave()`).
 */
export class RecordingSink implements ResponseSink {
  readonly requestId = "req_test";
  open = true;
  streaming = false;
  ended = false;
  replied: { status: number; contentType: string; body: Buffer } | undefined;
  /** Bytes written while streaming, and the number of write calls. */
  bytes = 0;
  writes = 0;
  private readonly chunks: Buffer[] = [];
  private blocked = false;
  private abortListener: (() => void) | undefined;
  private drainListener: (() => void) | undefined;
  private firstWrite: (() => void) | undefined;
  /** Resolves at the first streamed write. */
  readonly started = new Promise<void>((resolve) => (this.firstWrite = resolve));

  get text(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }

  /** Whether a producer is waiting for `unblock()`. */
  get waitingForDrain(): boolean {
    return this.drainListener !== undefined;
  }

  onAbort(listener: () => void): void {
    this.abortListener = listener;
  }

  reply(status: number, contentType: string, body: string | Uint8Array): void {
    this.replied = { status, contentType, body: Buffer.from(body) };
    this.open = false;
  }

  write(chunk: string | Uint8Array): boolean {
    this.streaming = true;
    this.writes++;
    this.bytes += Buffer.byteLength(chunk);
    // Only content a test reads back is kept; floods are counted, not stored.
    if (this.bytes < 1024 * 1024) this.chunks.push(Buffer.from(chunk));
    this.firstWrite?.();
    return !this.blocked;
  }

  onDrain(resume: () => void): void {
    this.drainListener = resume;
  }

  end(last?: string | Uint8Array): void {
    if (last) this.write(last);
    this.ended = true;
    this.open = false;
  }

  block(): void {
    this.blocked = true;
  }

  unblock(): void {
    this.blocked = false;
    const drain = this.drainListener;
    this.drainListener = undefined;
    drain?.();
  }

  leave(): void {
    this.open = false;
    this.abortListener?.();
  }
}
