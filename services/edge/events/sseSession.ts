import { sseStreamsOpen } from "../../shared/metrics/metrics.ts";
import type { StatusChange } from "../../tasks/statusChanges.ts";
import type { ResponseSink } from "../chat/responseSink.ts";

export interface SseSessionOptions {
  /** A comment line this often keeps idle connections (and proxies) from timing out. */
  keepaliveMs: number;
  /** Frames a client may leave unread; past it the stream ends and the client resumes with Last-Event-ID. */
  maxUnread: number;
  /** The change's whole frame (`id`, `event: status`, `data:` the query endpoint's `data`), built once for every stream that shows it. */
  frameOf: (change: StatusChange) => Uint8Array;
  /** A one-task stream ends after the task's final state; an account's goes on. */
  endAfterFinal: boolean;
}

/**
 * One open `text/event-stream` of status changes: `id: <sequence>`, `event: status`, `data: {...}`, each
 * change once and in order (anything at or before the last sent id is dropped); a task's stream ends after
 * its final state.
 * Memory per stream is bounded: a client that does not read is cut off, not buffered for.
 */
export class SseSession {
  private lastSent: number;
  private unread = 0;
  private waitingForDrain = false;
  private readonly keepalive: NodeJS.Timeout;
  private readonly cleanups: Array<() => void> = [];
  private closed = false;

  constructor(
    private readonly sink: ResponseSink,
    private readonly options: SseSessionOptions,
    resumeAfter = 0,
  ) {
    this.lastSent = resumeAfter;
    this.keepalive = setInterval(() => this.write(": keepalive\n\n"), options.keepaliveMs);
    sseStreamsOpen.inc();
    sink.onAbort(() => this.close());
  }

  get open(): boolean {
    return this.sink.open;
  }

  /** Runs when the stream ends, whoever ends it. */
  onClose(cleanup: () => void): void {
    if (this.sink.open && !this.closed) this.cleanups.push(cleanup);
    else cleanup();
  }

  /** Sends the stream's head (status 200 and headers) at once, so clients see it is open. */
  begin(): void {
    this.write("retry: 2000\n\n");
  }

  /** Nothing more will ever come: 204 No Content, which a standard EventSource takes as "stop reconnecting". */
  finish(): void {
    this.sink.reply(204, "text/plain", "");
    this.close();
  }

  emit(change: StatusChange): void {
    if (!this.sink.open || change.sequence <= this.lastSent) return;
    this.lastSent = change.sequence;
    const frame = this.options.frameOf(change);
    if (change.final && this.options.endAfterFinal) {
      this.sink.end(frame);
      this.close();
      return;
    }
    this.write(frame);
  }

  close(): void {
    if (this.sink.open) this.sink.end();
    this.release();
  }

  /**
   * Lets the stream's timer, subscriptions and place go, and leaves its answer to the caller: a follow that
   * failed, whose error the route still answers. (Its sink then ends without telling the session, which kept
   * its keepalive timer, its subscriptions and its account's place for good.)
   */
  release(): void {
    if (!this.closed) sseStreamsOpen.dec();
    this.closed = true;
    clearInterval(this.keepalive);
    for (const cleanup of this.cleanups.splice(0)) cleanup();
  }

  private write(frame: string | Uint8Array): void {
    if (!this.sink.open) return;
    if (this.waitingForDrain && ++this.unread > this.options.maxUnread) {
      this.close();
      return;
    }
    if (!this.sink.write(frame) && !this.waitingForDrain) {
      this.waitingForDrain = true;
      this.sink.onDrain(() => {
        this.waitingForDrain = false;
        this.unread = 0;
      });
    }
  }
}
