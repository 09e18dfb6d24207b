/** An upstream spoke HTTP we cannot follow; the connection is dropped, never reused. */
export class ProtocolError extends Error {}

const CRLF = Buffer.from("\r\n");
/** Longest chunk-size or trailer line we accept: real ones are a few bytes. */
const MAX_LINE = 8192;

/**
 * Decodes an HTTP/1.1 `Transfer-Encoding: chunked` body incrementally. Payload comes out as slices of the
 * input (no copies); an input may end anywhere, even inside a size line or a CRLF.
 */
export class ChunkedDecoder {
  private state: "size" | "data" | "dataEnd" | "trailer" | "done" = "size";
  private remaining = 0;
  private partialLine: Buffer | undefined;

  get done(): boolean {
    return this.state === "done";
  }

  /**
   * Feeds bytes; `emit` receives payload slices in order. Returns the offset just past the end of the body
   * when it ended inside `input`, or -1 when more input is needed.
   */
  push(input: Buffer, emit: (payload: Buffer) => void): number {
    let data = input;
    let i = 0;
    if (this.partialLine) {
      data = Buffer.concat([this.partialLine, input]);
      this.partialLine = undefined;
    }
    // Offsets returned to the caller are into `input`, which follows the carried partial line.
    const shift = data.length - input.length;
    while (i < data.length) {
      if (this.state === "data") {
        const n = Math.min(this.remaining, data.length - i);
        emit(data.subarray(i, i + n));
        this.remaining -= n;
        i += n;
        if (this.remaining === 0) this.state = "dataEnd";
        continue;
      }
      const eol = data.indexOf(CRLF, i);
      if (eol < 0) {
        if (data.length - i > MAX_LINE) throw new ProtocolError("chunked body: line too long");
        this.partialLine = Buffer.from(data.subarray(i));
        return -1;
      }
      const line = data.subarray(i, eol);
      i = eol + 2;
      if (this.state === "size") {
        const text = line.toString("latin1").split(";", 1)[0]?.trim() ?? "";
        if (!/^[0-9a-fA-F]{1,8}$/.test(text)) throw new ProtocolError(`chunked body: bad chunk size "${text.slice(0, 20)}"`);
        this.remaining = parseInt(text, 16);
        this.state = this.remaining === 0 ? "trailer" : "data";
      } else if (this.state === "dataEnd") {
        if (line.length !== 0) throw new ProtocolError("chunked body: chunk not followed by CRLF");
        this.state = "size";
      } else if (this.state === "trailer") {
        // Trailer fields are ignored; an empty line ends the message.
        if (line.length === 0) {
          this.state = "done";
          return i - shift;
        }
      }
    }
    return -1;
  }
}
