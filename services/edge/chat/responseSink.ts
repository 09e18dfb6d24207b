import { statusLine } from "../http/reply.ts";
import type { HttpResponse } from "../http/uws.ts";

/**
 * What a chat handler writes to: either one whole reply or an SSE stream, with uWS's rules kept in one
 * place — every write corked (we are always past an await here), nothing written after the client left
 * or after the end, backpressure reported to the caller and a drain callback to resume it.
 */
export interface ResponseSink {
  readonly requestId: string;
  /** False once the client went away or the response ended: stop producing. */
  readonly open: boolean;
  /** True once stream headers went out: errors must now be SSE error events, not a status. */
  readonly streaming: boolean;
  /** Called once if the client disconnects before the response ended. */
  onAbort(listener: () => void): void;
  /** A whole reply with a body (JSON for chat); `closeConnection` when the request body was not fully read. */
  reply(status: number, contentType: string, body: string | Uint8Array, closeConnection?: boolean, headers?: Record<string, string>): void;
  /** Writes SSE bytes (status 200 and headers go out with the first call). False = slow down until `onDrain`. */
  write(chunk: string | Uint8Array): boolean;
  /** Runs `resume` once the client has taken what was buffered, or has left. One waiter at a time. */
  onDrain(resume: () => void): void;
  /** Ends the stream, writing `last` first if given. */
  end(last?: string | Uint8Array): void;
}

const SSE_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ["content-type", "text/event-stream"],
  ["cache-control", "no-cache"],
  // Reverse proxies (nginx) otherwise buffer the stream and destroy time-to-first-chunk.
  ["x-accel-buffering", "no"],
];

export class UwsResponseSink implements ResponseSink {
  private aborted = false;
  private ended = false;
  private started = false;
  private abortListener: (() => void) | undefined;
  private drainListener: (() => void) | undefined;
  private writableRegistered = false;

  constructor(private readonly res: HttpResponse, readonly requestId: string) {
    // Must happen synchronously in the uWS handler: an unanswered request without onAborted kills the process.
    res.onAborted(() => {
      this.aborted = true;
      const listener = this.abortListener;
      const drain = this.drainListener;
      this.abortListener = undefined;
      this.drainListener = undefined;
      listener?.();
      // Wake a producer waiting for drain, so it sees `open` is false and stops instead of hanging.
      drain?.();
    });
  }

  get open(): boolean {
    return !this.aborted && !this.ended;
  }

  get streaming(): boolean {
    return this.started;
  }

  onAbort(listener: () => void): void {
    if (this.aborted) listener();
    else this.abortListener = listener;
  }

  reply(status: number, contentType: string, body: string | Uint8Array, closeConnection = false, headers?: Record<string, string>): void {
    if (!this.open) return;
    this.ended = true;
    this.abortListener = undefined;
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status)).writeHeader("content-type", contentType).writeHeader("x-request-id", this.requestId);
      for (const [name, value] of Object.entries(headers ?? {})) this.res.writeHeader(name, value);
      this.res.end(body, closeConnection);
    });
  }

  write(chunk: string | Uint8Array): boolean {
    if (!this.open) return true;
    let ok = true;
    this.res.cork(() => {
      this.writeHeadOnce();
      ok = this.res.write(chunk);
    });
    return ok;
  }

  onDrain(resume: () => void): void {
    if (!this.open) return;
    this.drainListener = resume;
    if (this.writableRegistered) return;
    this.writableRegistered = true;
    // With a writable handler registered, uWS leaves draining its buffer to our next write (which the
    // resumed producer makes at once); returning true tells it nothing failed.
    this.res.onWritable(() => {
      const listener = this.drainListener;
      this.drainListener = undefined;
      listener?.();
      return true;
    });
  }

  end(last?: string | Uint8Array): void {
    if (!this.open) return;
    this.ended = true;
    this.abortListener = undefined;
    this.drainListener = undefined;
    this.res.cork(() => {
      this.writeHeadOnce();
      // A zero-length chunk ends chunked encoding, so the closing bytes travel with `end`.
      this.res.end(last);
    });
  }

  private writeHeadOnce(): void {
    if (this.started) return;
    this.started = true;
    this.res.writeStatus("200 OK");
    for (const [name, value] of SSE_HEADERS) this.res.writeHeader(name, value);
    this.res.writeHeader("x-request-id", this.requestId);
  }
}
