import type { ServerResponse } from "node:http";
import { answered } from "./answerMeter.ts";

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  /** Omitted for HEAD-style replies that only report a length. */
  body?: string | Uint8Array;
  /** With no body: the Content-Length to announce (HEAD). */
  announcedLength?: number;
}

export const jsonReply = (status: number, value: unknown, headers?: Record<string, string>): HttpReply => ({
  status,
  body: JSON.stringify(value),
  headers: { "content-type": "application/json", ...headers },
});

/** Writes a whole reply; `closeConnection` when the request's body was not read (it may still be arriving). */
export function writeReply(res: ServerResponse, reply: HttpReply, closeConnection = false): void {
  if (res.headersSent || res.destroyed) return;
  const length = reply.body === undefined ? (reply.announcedLength ?? 0) : Buffer.byteLength(reply.body);
  res.writeHead(reply.status, { ...reply.headers, "content-length": String(length), ...(closeConnection ? { connection: "close" } : {}) });
  res.end(reply.body);
  answered(res);
}
