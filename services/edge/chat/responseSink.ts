import type { ServerResponse } from "node:http";
import { answered } from "../http/answerMeter.ts";

/**
 * What a streaming handler writes to: either one whole reply or an SSE stream, with the rules kept in one
 * place — nothing written after the client left or after the end, backpressure reported to the caller and
 * a drain callback to resume it.
 */
export interface ResponseSink {
  readonly requestId: string;
  /** False once the client went away or the response ended: stop producing. */
  readonly open: boolean;
  /** True once stream headers went out: errors must now be SSE error events, not a status. */
  readonly streaming: boolean;
  /** Called once if the client disconnects before the response ended. */
  onAbort(listener: () => void): void;
  /** A whole reply with a body (JSON for chat). */
  reply(status: number, contentType: string, body: string | Uint8Array, headers?: Record<string, string>): void;
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

export class NodeResponseSink implements ResponseSink {
  private aborted = false;
  private ended = false;
  private started = false;
  private abortListener: (() => void) | undefined;
  private drainListener: (() => void) | undefined;

  constructor(
    private readonly res: ServerResponse,
    readonly requestId: string,
    /**
     * Stream without chunked encoding, the end marked by closing the connection: each write is one socket
     * write of the bytes as given, which matters when one event goes to thousands of streams.
     */
    private readonly closeDelimited = false,
  ) {
    res.once("close", () => {
      if (this.ended) return;
      // Closed before we ended it: the client went away (a stream it left is counted with its status).
      this.aborted = true;
      if (res.headersSent) answered(res);
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

  reply(status: number, contentType: string, body: string | Uint8Array, headers?: Record<string, string>): void {
    if (!this.open) return;
    this.ended = true;
    this.abortListener = undefined;
    this.res.writeHead(status, {
      "content-type": contentType,
      "x-request-id": this.requestId,
      "content-length": String(Buffer.byteLength(body)),
      ...headers,
    });
    this.res.end(body);
    answered(this.res);
  }

  write(chunk: string | Uint8Array): boolean {
    if (!this.open) return true;
    this.writeHeadOnce();
    return this.res.write(chunk);
  }

  onDrain(resume: () => void): void {
    if (!this.open) return;
    this.drainListener = resume;
    this.res.once("drain", () => {
      const listener = this.drainListener;
      this.drainListener = undefined;
      listener?.();
    });
  }

  end(last?: string | Uint8Array): void {
    if (!this.open) return;
    this.ended = true;
    this.abortListener = undefined;
    this.drainListener = undefined;
    this.writeHeadOnce();
    if (last === undefined) this.res.end();
    else this.res.end(last);
    answered(this.res);
  }

  private writeHeadOnce(): void {
    if (this.started) return;
    this.started = true;
    if (this.closeDelimited) this.res.useChunkedEncodingByDefault = false;
    this.res.writeHead(200, { ...Object.fromEntries(SSE_HEADERS), "x-request-id": this.requestId, ...(this.closeDelimited ? { connection: "close" } : {}) });
  }
}
