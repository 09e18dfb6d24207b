import { randomUUID } from "node:crypto";

/** A file part: its bytes, type and file name. */
export interface FilePart {
  bytes: Uint8Array;
  type: string;
  name: string;
}

/**
 * A `multipart/form-data` body in one buffer, encoded as the platform's FormData encodes it (WHATWG: line
 * breaks in names and values become CRLF; `"`, CR and LF in names and file names are percent-escaped).
 *
 * Written here rather than sending undici's FormData: undici writes such a body part by part, one system
 * call each (five per create, seen with strace), through web streams; serializing it first with undici's
 * Response cost 38–46 µs a create against 2–3 µs for this (measured on this machine, 20,000 each).
 */
export function multipartBody(fields: ReadonlyArray<readonly [string, string | FilePart]>): { body: Buffer; contentType: string } {
  const boundary = `----reelay-${randomUUID()}`;
  const parts: Uint8Array[] = [];
  for (const [name, value] of fields) {
    const disposition = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeQuoted(normalizeLineBreaks(name))}"`;
    if (typeof value === "string") {
      parts.push(Buffer.from(`${disposition}\r\n\r\n${normalizeLineBreaks(value)}\r\n`));
    } else {
      parts.push(Buffer.from(`${disposition}; filename="${escapeQuoted(value.name)}"\r\nContent-Type: ${value.type || "application/octet-stream"}\r\n\r\n`), value.bytes, Buffer.from("\r\n"));
    }
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

const normalizeLineBreaks = (text: string): string => text.replace(/\r?\n|\r/g, "\r\n");
const escapeQuoted = (text: string): string => text.replace(/\n/g, "%0A").replace(/\r/g, "%0D").replace(/"/g, "%22");
