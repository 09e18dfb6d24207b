import { ChatUsage } from "../../../../../contracts/chat.ts";

/**
 * Turns upstream SSE bytes into the bytes to forward, touching as little as possible: upstream reads are
 * cut at the last event boundary (an event split across reads is held until complete), the bytes are
 * forwarded as they are, and the only event ever parsed is the one carrying a non-null `usage` — found
 * with a native byte search, not by parsing every chunk. That event is billed, and dropped when the
 * client did not ask for usage (we asked on its behalf).
 */

const BOUNDARY = Buffer.from("\n\n");
const CRLF_BOUNDARY = Buffer.from("\r\n\r\n");
const USAGE_KEY = Buffer.from('"usage"');
const DONE = Buffer.from("data: [DONE]");
const NEWLINE = 0x0a;

const isSpace = (byte: number | undefined) => byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;

/** End (exclusive) of the last complete event in `data`, or -1. */
function lastEventEnd(data: Buffer): number {
  const lf = data.lastIndexOf(BOUNDARY);
  const crlf = data.lastIndexOf(CRLF_BOUNDARY);
  return Math.max(lf < 0 ? -1 : lf + 2, crlf < 0 ? -1 : crlf + 4);
}

const CRLF_BLANK_LINE = Buffer.from("\n\r\n");

/** Start of the event containing `at` (just after the previous blank line), and its end (after its own). */
function eventBounds(data: Buffer, at: number): [number, number] {
  const lf = data.lastIndexOf(BOUNDARY, at);
  const crlf = data.lastIndexOf(CRLF_BLANK_LINE, at);
  const start = Math.max(lf < 0 ? 0 : lf + 2, crlf < 0 ? 0 : crlf + 3);
  const nextLf = data.indexOf(BOUNDARY, at);
  const nextCrlf = data.indexOf(CRLF_BOUNDARY, at);
  const end = nextLf >= 0 && (nextCrlf < 0 || nextLf < nextCrlf) ? nextLf + 2 : nextCrlf >= 0 ? nextCrlf + 4 : data.length;
  return [start, end];
}

/** The JSON of an event's `data:` lines (joined by newlines, as the SSE spec says). */
export function eventData(event: string): string {
  return event
    .split(/\r?\n/)
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(line[5] === " " ? 6 : 5))
    .join("\n");
}

export class SseRelay {
  /** Usage from the upstream's final usage chunk, once seen. */
  usage: ChatUsage | undefined;
  /** The upstream finished properly with `data: [DONE]`. */
  sawDone = false;
  private carry: Buffer | undefined;

  /** @param forwardUsageChunk whether the client asked for the usage chunk itself */
  constructor(private readonly forwardUsageChunk: boolean) {}

  /** Bytes of an event begun and not complete yet (held until its blank line comes). */
  get heldBytes(): number {
    return this.carry?.length ?? 0;
  }

  /** Bytes to forward now (complete events only), or undefined when nothing is complete yet. */
  push(chunk: Buffer): Buffer | undefined {
    const data = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    const end = lastEventEnd(data);
    if (end < 0) {
      this.carry = data;
      return undefined;
    }
    this.carry = end < data.length ? data.subarray(end) : undefined;
    return this.inspect(end < data.length ? data.subarray(0, end) : data);
  }

  /** At the upstream's end: whatever was left without a closing blank line, as a final event. */
  flush(): Buffer | undefined {
    const rest = this.carry;
    this.carry = undefined;
    if (!rest || rest.toString("utf8").trim() === "") return undefined;
    return this.inspect(Buffer.concat([rest, BOUNDARY]));
  }

  private inspect(events: Buffer): Buffer {
    let out = events;
    for (let at = out.indexOf(USAGE_KEY); at >= 0; at = out.indexOf(USAGE_KEY, at + USAGE_KEY.length)) {
      let i = at + USAGE_KEY.length;
      while (isSpace(out[i])) i++;
      if (out[i] !== 0x3a /* : */) continue; // a string value "usage", not the key
      i++;
      while (isSpace(out[i])) i++;
      if (out[i] !== 0x7b /* { */) continue; // "usage": null on ordinary chunks
      const [start, end] = eventBounds(out, at);
      const kept = this.readUsage(out.subarray(start, end).toString("utf8"));
      if (!kept) {
        out = Buffer.concat([out.subarray(0, start), out.subarray(end)]);
        at = start - USAGE_KEY.length;
      }
    }
    // Only at a line start: JSON text escapes newlines, so "data: [DONE]" there never follows a raw one.
    for (let done = out.indexOf(DONE); done >= 0 && !this.sawDone; done = out.indexOf(DONE, done + 1)) {
      if (done === 0 || out[done - 1] === NEWLINE) this.sawDone = true;
    }
    return out;
  }

  /** Records the usage of one event; false when the event should not be forwarded. */
  private readUsage(event: string): boolean {
    let chunk: unknown;
    try {
      chunk = JSON.parse(eventData(event));
    } catch {
      return true; // not ours to judge: forward it as the upstream sent it
    }
    if (typeof chunk !== "object" || chunk === null) return true;
    const { usage, choices } = chunk as { usage?: unknown; choices?: unknown };
    const parsed = ChatUsage.safeParse(usage);
    if (parsed.success) this.usage = parsed.data;
    // Some upstreams put usage on the last content chunk: that one carries content and must go through.
    const usageOnly = Array.isArray(choices) && choices.length === 0;
    return this.forwardUsageChunk || !usageOnly;
  }
}
