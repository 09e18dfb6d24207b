/** One part of a multipart/form-data body in its plain shape. */
export interface PlainPart {
  name: string;
  /** The part names a file (`filename="…"`): its content is bytes, not text. */
  isFile: boolean;
  data: Buffer;
}

/**
 * `multipart/form-data; boundary=…` and nothing else: the boundary a token without special characters, or
 * a quoted string of RFC 2046's boundary characters (1–70, not ending in a space).
 */
const CONTENT_TYPE = /^multipart\/form-data; ?boundary=(?:"([0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?])"|([0-9A-Za-z'+_\-.]{1,70}))$/i;
/** `form-data; name="…"` with an optional `filename="…"`: printable ASCII without quotes, backslashes or percent signs. */
const DISPOSITION = /^form-data; name="([\x20\x21\x23\x24\x26-\x5b\x5d-\x7e]+)"(?:; filename="([\x20\x21\x23\x24\x26-\x5b\x5d-\x7e]+)")?$/;
/** A file's `Content-Type`: printable ASCII, not starting with a space. */
const TYPE = /^[\x21-\x7e][\x20-\x7e]*$/;
const HEADERS_END = Buffer.from("\r\n\r\n");

/**
 * The parts (at most `maxParts`) of a multipart/form-data body in the shape every OpenAI SDK sends (and most HTTP libraries):
 * no preamble or epilogue, each part with a `Content-Disposition: form-data; name="…"` (and `filename="…"`
 * for a file, which may carry a `Content-Type`), nothing else. Anything else gives undefined, and busboy
 * reads the body instead (with its errors for what is malformed): a text part with a charset, an encoded
 * name, another header, transport padding.
 *
 * Why next to busboy: busboy took 40 µs of a create's CPU on the edge (a stream and a boundary search per
 * body), and the OpenAI create fell under 0.8 of the spec's JSON create (`npm run bench -- --only
 * openai-videos`); this reads the same parts in a few µs. test/plainMultipart.unit.spec.ts checks it against
 * busboy on random bodies: each it reads, it reads as busboy does.
 */
export function readPlainMultipart(contentType: string, body: Buffer, maxParts: number): PlainPart[] | undefined {
  const boundaryMatch = CONTENT_TYPE.exec(contentType);
  const boundary = boundaryMatch?.[1] ?? boundaryMatch?.[2];
  if (boundary === undefined) return undefined;
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // The first delimiter has no line break before it (no preamble).
  if (!body.subarray(0, delimiter.length - 2).equals(delimiter.subarray(2))) return undefined;
  const parts: PlainPart[] = [];
  let at = delimiter.length - 2;
  for (;;) {
    // After a delimiter: a line break and the next part, or "--" and the end (with an optional line break).
    if (body[at] === 0x2d && body[at + 1] === 0x2d) {
      const rest = body.length - (at + 2);
      return rest === 0 || (rest === 2 && body[at + 2] === 0x0d && body[at + 3] === 0x0a) ? parts : undefined;
    }
    if (body[at] !== 0x0d || body[at + 1] !== 0x0a) return undefined;
    const headersStart = at + 2;
    const headersEnd = body.indexOf(HEADERS_END, headersStart);
    if (headersEnd === -1) return undefined;
    const dataEnd = body.indexOf(delimiter, headersEnd + 4);
    if (dataEnd === -1) return undefined;
    const part = partOf(body.subarray(headersStart, headersEnd), body.subarray(headersEnd + 4, dataEnd));
    // More parts than the form can have: busboy's limits name it.
    if (!part || parts.length === maxParts) return undefined;
    parts.push(part);
    at = dataEnd + delimiter.length;
  }
}

/** A part from its header block (without its last line break) and its content, if both are plain. */
function partOf(headerBlock: Buffer, data: Buffer): PlainPart | undefined {
  let disposition: RegExpExecArray | null = null;
  let typed = false;
  for (const line of headerBlock.toString("latin1").split("\r\n")) {
    const colon = line.indexOf(": ");
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon).toLowerCase();
    const value = line.slice(colon + 2);
    if (name === "content-disposition" && disposition === null) {
      disposition = DISPOSITION.exec(value);
      if (disposition === null) return undefined;
    } else if (name === "content-type" && !typed && TYPE.test(value)) {
      typed = true;
    } else {
      return undefined;
    }
  }
  const [, name, filename] = disposition ?? [];
  // A text part with a Content-Type may name a charset (or application/octet-stream, which makes it a file).
  if (name === undefined || (typed && filename === undefined)) return undefined;
  return { name, isFile: filename !== undefined, data };
}
