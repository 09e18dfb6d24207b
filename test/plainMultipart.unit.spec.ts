import busboy from "busboy";
import fc from "fast-check";
import { FormData, Response } from "undici";
import { describe, expect, it } from "vitest";
import { readCreateForm } from "../services/edge/openaiVideos/createForm.ts";
import { readPlainMultipart } from "../services/edge/openaiVideos/plainMultipart.ts";

type Read = { name: string; isFile: boolean; data: string };

/** Every part of a body as busboy reads it (a field's text, a file's bytes as latin1), or its error. */
function viaBusboy(contentType: string, body: Buffer): Promise<Read[] | { error: string }> {
  return new Promise((resolve) => {
    const seen: Read[] = [];
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: { "content-type": contentType } });
    } catch (error) {
      resolve({ error: (error as Error).message });
      return;
    }
    const files: Array<Promise<void>> = [];
    parser.on("field", (name, value) => seen.push({ name, isFile: false, data: value }));
    parser.on("file", (name, stream) => {
      const read: Read = { name, isFile: true, data: "" };
      seen.push(read);
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      files.push(
        new Promise<void>((done) =>
          stream.on("end", () => {
            read.data = Buffer.concat(chunks).toString("latin1");
            done();
          }),
        ),
      );
    });
    parser.on("error", (error: Error) => resolve({ error: error.message }));
    parser.on("close", () => void Promise.all(files).then(() => resolve(seen)));
    parser.end(body);
  });
}

const asRead = (contentType: string, body: Buffer): Read[] | undefined =>
  readPlainMultipart(contentType, body, 8)?.map(({ name, isFile, data }) => ({ name, isFile, data: isFile ? data.toString("latin1") : data.toString("utf8") }));

const BOUNDARIES = ["----formdata-undici-0123456789", "b", "x".repeat(70), "----WebKitFormBoundary7MA4YWxkTrZu0gW", "'()+_,-./:=?"];
/** Mostly the plain choice (so that many bodies are read directly), sometimes one of the others. */
const mostly = <T>(plain: T, ...others: T[]) => fc.oneof({ weight: 5, arbitrary: fc.constant(plain) }, { weight: 1, arbitrary: fc.constantFrom(...others) });
/** A part as the generator writes it: each piece may be one a plain reader must leave to busboy. */
const part = fc.record({
  header: mostly("Content-Disposition", "content-disposition", "CONTENT-DISPOSITION", "Content-Disposition ", "Content-Disposition:"),
  name: fc.constantFrom("model", "prompt", "seconds", "size", "input_reference", "model", "prompt", "with space", "per%cent", 'qu"ote', "", "ünï"),
  filename: mostly<string | undefined>(undefined, "ref.png", "", "dir/ref.png", "ref%22.png"),
  disposition: mostly("form-data", "Form-Data", "attachment"),
  type: mostly<string | undefined>(undefined, "image/png", "text/plain; charset=latin1", "application/octet-stream", "text/plain"),
  extra: mostly<string | undefined>(undefined, "Content-Transfer-Encoding: base64", "X-Other: 1"),
  data: fc.oneof(
    fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)),
    fc.constantFrom("a red fox", "\r\n", "--", "\r\n--", "line\r\n\r\nbreak", "\xff\xfe", "").map((text) => Buffer.from(text, "latin1")),
  ),
});
const body = fc.record({
  boundary: fc.constantFrom(...BOUNDARIES),
  quoted: fc.boolean(),
  typeCase: fc.constantFrom("multipart/form-data", "Multipart/Form-Data"),
  typeExtra: mostly("", "; charset=utf-8"),
  preamble: mostly("", "preamble\r\n"),
  parts: fc.array(part, { maxLength: 5 }),
  end: mostly("--\r\n", "--", "--epilogue", "\r\n", ""),
  cut: mostly<number | undefined>(undefined, 0, 10, 50, 80, 120, 200),
});

type BodySpec = typeof body extends fc.Arbitrary<infer T> ? T : never;

/** The body and its Content-Type. */
function written({ boundary, quoted, typeCase, typeExtra, preamble, parts, end, cut }: BodySpec): { contentType: string; body: Buffer } {
  const chunks: Buffer[] = [Buffer.from(`${preamble}--${boundary}`, "latin1")];
  for (const p of parts) {
    const filename = p.filename === undefined ? "" : `; filename="${p.filename}"`;
    const lines = [`${p.header}: ${p.disposition}; name="${p.name}"${filename}`, ...(p.type ? [`Content-Type: ${p.type}`] : []), ...(p.extra ? [p.extra] : [])];
    chunks.push(Buffer.from(`\r\n${lines.join("\r\n")}\r\n\r\n`, "utf8"), p.data, Buffer.from(`\r\n--${boundary}`, "latin1"));
  }
  chunks.push(Buffer.from(end, "latin1"));
  const whole = Buffer.concat(chunks);
  return {
    contentType: `${typeCase}; boundary=${quoted ? `"${boundary}"` : boundary}${typeExtra}`,
    body: cut === undefined ? whole : whole.subarray(0, Math.min(cut, whole.length)),
  };
}

describe("plain multipart bodies, read without busboy", () => {
  it("any body it reads, it reads exactly as busboy does (and leaves every other to busboy)", async () => {
    let read = 0;
    await fc.assert(
      fc.asyncProperty(body, async (spec) => {
        const { contentType, body: bytes } = written(spec);
        const plain = asRead(contentType, bytes);
        if (plain === undefined) return;
        read++;
        expect(await viaBusboy(contentType, bytes)).toEqual(plain);
      }),
      { numRuns: 3000 },
    );
    // The generator's pieces are mostly ones to leave to busboy: enough bodies must still be read directly.
    expect(read).toBeGreaterThan(100);
  });

  it("reads what the platform's FormData sends: text fields and a file", async () => {
    const form = new FormData();
    form.append("model", "VideoModel-2.0-mini");
    form.append("prompt", "a fox\r\n--in the snow ✓");
    form.append("input_reference", new Blob([Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 13, 10, 45, 45])], { type: "image/png" }), "ref.png");
    const encoded = new Response(form);
    const contentType = encoded.headers.get("content-type") ?? "";
    const bytes = Buffer.from(await encoded.arrayBuffer());
    const plain = asRead(contentType, bytes);
    expect(plain).toEqual([
      { name: "model", isFile: false, data: "VideoModel-2.0-mini" },
      { name: "prompt", isFile: false, data: "a fox\r\n--in the snow ✓" },
      { name: "input_reference", isFile: true, data: Buffer.from([0x89, 0x50, 0x4e, 0x47, 13, 10, 45, 45]).toString("latin1") },
    ]);
    expect(await viaBusboy(contentType, bytes)).toEqual(plain);
    // More parts than asked for are left to busboy (whose limits name them).
    expect(readPlainMultipart(contentType, bytes, 2)).toBeUndefined();
    expect(readPlainMultipart(contentType, bytes, 3)).toHaveLength(3);
  });

  it("a create form answers the same read directly or by busboy (a preamble sends any body to busboy), errors included", async () => {
    const limits = { maxFileBytes: 16, maxFieldBytes: 24 };
    const outcome = (contentType: string, bytes: Buffer) =>
      readCreateForm(contentType, bytes, limits).then(
        (form) => ({ form }),
        (error: Error) => ({ error: `${error.constructor.name}: ${error.message}` }),
      );
    await fc.assert(
      fc.asyncProperty(body, async (spec) => {
        const direct = written({ ...spec, preamble: "" });
        const viaPreamble = written({ ...spec, preamble: "preamble\r\n", cut: spec.cut === undefined ? undefined : spec.cut + "preamble\r\n".length });
        expect(await outcome(direct.contentType, direct.body)).toEqual(await outcome(viaPreamble.contentType, viaPreamble.body));
      }),
      { numRuns: 2000 },
    );
  });
});
