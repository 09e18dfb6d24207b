import type { IncomingMessage } from "node:http";
import { PayloadTooLargeError, ValidationError } from "../../shared/errors.ts";

/** What a route may read of a request. */
export interface RequestInfo {
  method: string;
  /** The path, without the query. */
  url: string;
  query: string;
  header(name: string): string;
  /** The TCP peer's address (a proxy's, behind one). */
  peer: string;
}

/**
 * A class rather than an object literal with a `header` closure: the edge makes one per request, and under
 * tsx every named closure costs a `defineProperty` (esbuild's keepNames), measurable on cached answers.
 */
class CapturedRequest implements RequestInfo {
  readonly method: string;
  readonly url: string;
  readonly query: string;
  readonly peer: string;
  constructor(private readonly req: IncomingMessage) {
    const target = req.url ?? "/";
    const mark = target.indexOf("?");
    this.method = (req.method ?? "GET").toUpperCase();
    this.url = mark === -1 ? target : target.slice(0, mark);
    this.query = mark === -1 ? "" : target.slice(mark + 1);
    this.peer = req.socket.remoteAddress ?? "";
  }
  header(name: string): string {
    const value = this.req.headers[name];
    return Array.isArray(value) ? value.join(", ") : (value ?? "");
  }
}

export const captureRequest = (req: IncomingMessage): RequestInfo => new CapturedRequest(req);

/**
 * Reads the whole body, enforcing the size limit while reading (a declared length over it is refused
 * before reading anything), so an oversized body costs at most `maxBytes` of memory.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > maxBytes) {
      reject(new PayloadTooLargeError(`request body is ${declared} bytes; the limit is ${maxBytes}`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.off("data", onData);
        req.pause();
        reject(new PayloadTooLargeError(`request body exceeds the limit of ${maxBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)));
    req.once("error", reject);
  });
}

/**
 * Deepest nesting of arrays and objects a JSON body may have. JSON.parse takes any depth, but what reads the
 * value after it (zod, JSON.stringify when relaying) recurses: 200,000 levels overflowed the stack (a 500).
 */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPENERS = new Set([0x5b, 0x7b]);
const CLOSERS = new Set([0x5d, 0x7d]);

/** Whether the JSON text nests deeper than `limit` (brackets inside strings do not count). */
function nestsDeeperThan(body: Buffer, limit: number): boolean {
  // Fewer bytes than the limit cannot open that many levels.
  if (body.length <= limit) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const byte = body[i] as number;
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) inString = true;
    else if (OPENERS.has(byte)) {
      if (++depth > limit) return true;
    } else if (CLOSERS.has(byte)) depth--;
  }
  return false;
}

const BYTE_ORDER_MARK = 0xfeff;

export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw new ValidationError("request body is empty; send a JSON object");
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) throw new ValidationError(`request body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels`);
  const text = body.toString("utf8");
  try {
    // RFC 8259 §8.1 lets a parser ignore a leading byte order mark, which some Windows tools write; JSON.parse
    // refused it with an invisible character in its message.
    return JSON.parse(text.charCodeAt(0) === BYTE_ORDER_MARK ? text.slice(1) : text);
  } catch (error) {
    throw new ValidationError(`request body is not valid JSON: ${(error as Error).message}`);
  }
}
