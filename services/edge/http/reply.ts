import type { HttpResponse } from "./uws.ts";

export interface HttpReply {
  status: number;
  headers?: Record<string, string>;
  /** Omitted for HEAD-style replies that only report a length. */
  body?: string | Uint8Array;
  /** With no body: the Content-Length to announce (HEAD). */
  announcedLength?: number;
}

const STATUS_LINES: Record<number, string> = {
  200: "200 OK",
  206: "206 Partial Content",
  400: "400 Bad Request",
  401: "401 Unauthorized",
  403: "403 Forbidden",
  404: "404 Not Found",
  405: "405 Method Not Allowed",
  413: "413 Payload Too Large",
  416: "416 Range Not Satisfiable",
  422: "422 Unprocessable Entity",
  429: "429 Too Many Requests",
  500: "500 Internal Server Error",
  502: "502 Bad Gateway",
  503: "503 Service Unavailable",
  504: "504 Gateway Timeout",
};

export const statusLine = (status: number): string => STATUS_LINES[status] ?? String(status);

export const jsonReply = (status: number, value: unknown, headers?: Record<string, string>): HttpReply => ({
  status,
  body: JSON.stringify(value),
  headers: { "content-type": "application/json", ...headers },
});

/** Writes a whole reply. Call inside `res.cork` when not in the handler's synchronous part. */
export function writeReply(res: HttpResponse, reply: HttpReply, closeConnection = false): void {
  res.writeStatus(statusLine(reply.status));
  for (const [name, value] of Object.entries(reply.headers ?? {})) res.writeHeader(name, value);
  if (reply.body === undefined) res.endWithoutBody(reply.announcedLength ?? 0, closeConnection);
  else res.end(reply.body, closeConnection);
}
