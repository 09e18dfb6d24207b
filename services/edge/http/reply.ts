import type { ServerResponse } from "node:http";
import { answered } from "./answerMeter.ts";

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

export const jsonReply = (status: number, value: unknown, headers?: Record<string, string>): HttpReply => ({
  status,
  body: JSON.stringify(value),
  headers: { "content-type": "application/json", ...headers },
});

/** Writes a whole reply; `closeConnection` when the request's body was not read (it may still be arriving). */
export function writeReply(res: ServerResponse, reply: HttpReply, closeConnection = false): void {
  if (res.headersSent || res.destroyed) return;
  // To HEAD, node:http sends these headers (the GET answer's length among them) and drops the body.
  const length = reply.body === undefined ? 0 : Buffer.byteLength(reply.body);
  // A 304 has no body, and a Content-Length there would be taken for the length of the cached one.
  const framing = reply.status === 304 ? {} : { "content-length": String(length) };
  res.writeHead(reply.status, { ...reply.headers, ...framing, ...(closeConnection ? { connection: "close" } : {}) });
  res.end(reply.body);
  answered(res);
}
