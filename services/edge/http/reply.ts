import type { ServerResponse } from "node:http";
import { pipeline, type Readable } from "node:stream";
import { answered } from "./answerMeter.ts";

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** A body sent from a file instead (a stored video), as the client takes it. */
  file?: FileBody;
}

/** A body read from a file while it is sent: an answer holds one read's worth of memory, however slow its client. */
export interface FileBody {
  readonly length: number;
  /** The bytes, opened once, when they are sent. */
  open(): Readable;
  /** They will not be sent (a HEAD, a client gone): what `open` would have read is let go. */
  skip(): void;
  /** A client that takes no byte for this long is cut off: a slow client may take long, a stalled one not forever. */
  readonly stallMs: number;
}

export const jsonReply = (status: number, value: unknown, headers?: Record<string, string>): HttpReply => ({
  status,
  body: JSON.stringify(value),
  headers: { "content-type": "application/json", ...headers },
});

/** Writes a whole reply; `closeConnection` when the request's body was not read (it may still be arriving). */
export function writeReply(res: ServerResponse, reply: HttpReply, closeConnection = false): void {
  if (res.headersSent || res.destroyed) {
    reply.file?.skip();
    return;
  }
  // To HEAD, node:http sends these headers (the GET answer's length among them) and drops the body.
  const length = reply.file?.length ?? (reply.body === undefined ? 0 : Buffer.byteLength(reply.body));
  // A 304 has no body, and a Content-Length there would be taken for the length of the cached one.
  const framing = reply.status === 304 ? {} : { "content-length": String(length) };
  res.writeHead(reply.status, { ...reply.headers, ...framing, ...(closeConnection ? { connection: "close" } : {}) });
  if (reply.file) sendFile(res, reply.file);
  else res.end(reply.body);
  answered(res);
}

function sendFile(res: ServerResponse, file: FileBody): void {
  if (res.req.method === "HEAD") {
    file.skip();
    res.end();
    return;
  }
  res.setTimeout(file.stallMs, () => res.destroy());
  // A failed read or a client gone ends the connection: the client sees a body shorter than its length.
  pipeline(file.open(), res, () => undefined);
}
