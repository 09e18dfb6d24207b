import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { HeadersTooLargeError, NotImplementedError, RequestTimeoutError, UriTooLongError, ValidationError, type ReelayError } from "../../shared/errors.ts";
import type { ErrorReplyFor } from "./apiErrors.ts";
import { MAX_HEADER_BYTES, MAX_HEADER_COUNT, MAX_URL_BYTES } from "./limits.ts";
import type { HttpReply } from "./reply.ts";

/** What node:http passes to `clientError`: its parser's code and the bytes it was parsing. */
export interface ClientError extends Error {
  code?: string;
  rawPacket?: Buffer;
}

/** A request line as HTTP spells it: a method token, a target, a version. */
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/\d\.\d\r?$/;

/** The request line the parser choked on, when there is one (only the first 8 KiB are looked at). */
function requestLine(packet: Buffer | undefined): { method: string; target: string; complete: boolean } | undefined {
  if (!packet) return undefined;
  const head = packet.subarray(0, MAX_URL_BYTES + 64).toString("latin1");
  const end = head.indexOf("\n");
  const match = REQUEST_LINE.exec(end === -1 ? head : head.slice(0, end));
  if (match) return { method: match[1] ?? "", target: match[2] ?? "/", complete: true };
  // A line longer than we look at: only its method and the start of its target are known.
  const start = /^([A-Z]+) (\/\S*)/.exec(head);
  return start && end === -1 ? { method: start[1] ?? "", target: start[2] ?? "/", complete: false } : undefined;
}

/** Header lines in what the parser had read (the lines after the request line, up to the blank one). */
function headerFieldsIn(packet: Buffer | undefined): number {
  if (!packet) return 0;
  const head = packet.subarray(0, MAX_HEADER_BYTES + MAX_URL_BYTES).toString("latin1");
  const end = head.indexOf("\r\n\r\n");
  return (end === -1 ? head : head.slice(0, end)).split("\n").length - 1;
}

/** The status HTTP calls for, by node:http's parser error. */
function errorOf(error: ClientError, line: ReturnType<typeof requestLine>): ReelayError {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      // node:http counts the request line with the headers: a target alone that long is a 414. Node 24's parser
      // also ends here past `maxHeadersCount` (Node 20 and 22 hand the request over and the app counts).
      if (line && !line.complete) return new UriTooLongError(`request target longer than ${MAX_URL_BYTES} bytes`);
      return headerFieldsIn(error.rawPacket) > MAX_HEADER_COUNT
        ? new HeadersTooLargeError(`more than ${MAX_HEADER_COUNT} header fields`)
        : new HeadersTooLargeError(`request line and headers exceed ${MAX_HEADER_BYTES} bytes`);
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return new RequestTimeoutError("request not received in time");
    case "HPE_INVALID_METHOD":
      // A well-formed request line with a method the parser does not know: not implemented, not malformed (RFC 9110 §9.1).
      if (line?.complete) return new NotImplementedError(`method ${line.method.slice(0, 40)} is not implemented`);
      return new ValidationError("malformed HTTP request");
    default:
      return new ValidationError("malformed HTTP request");
  }
}

/** A whole answer as bytes, for sockets node:http no longer manages (a parse error, a CONNECT). Closes the connection. */
export function rawReply(reply: HttpReply): Buffer {
  const body = Buffer.from(reply.body ?? "");
  let head = `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? ""}\r\n`;
  for (const [name, value] of Object.entries(reply.headers ?? {})) head += `${name}: ${value}\r\n`;
  head += `content-length: ${body.length}\r\nconnection: close\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, "latin1"), body]);
}

/**
 * How long an answered-and-closing connection keeps reading what the client still sends (nginx's
 * `lingering_timeout` is 5 s too). Closing a socket with unread bytes in its buffer makes the kernel
 * send a reset, and a client still writing its oversized head then loses the answer it was sent.
 */
export const LINGER_MS = 5_000;
/** Sockets answered here and lingering: node:http reports their later bytes as parse errors again. */
const lingering = new WeakSet<Duplex>();

/**
 * A request node:http could not parse: answered in the format of its path's API when the request line
 * names one (431, 414, 408, 501, else 400) and closed gracefully; never a crash, never a silent hang-up.
 */
export function answerUnparsed(error: ClientError, socket: Duplex, errorReply: ErrorReplyFor): void {
  if (lingering.has(socket)) return;
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const line = requestLine(error.rawPacket);
  const path = line?.target.split("?", 1)[0] ?? "/";
  lingerClose(socket, rawReply(errorReply(path, errorOf(error, line))));
}

/**
 * Sends the last answer and half-closes, then goes on reading (and dropping) what the client sends until
 * it closes its side or LINGER_MS passes, like nginx's lingering close, so the answer is not lost to a reset.
 */
export function lingerClose(socket: Duplex, answer: Buffer): void {
  lingering.add(socket);
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
  socket.once("end", () => socket.destroy());
  socket.resume();
  socket.end(answer);
}
