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
  res.writeHead(reply.status, { ...reply.headers, "content-length": String(length), ...(closeConnection ? { connection: "close" } : {}) });
  res.end(reply.body);
  answered(res);
}
