import { Readable } from "node:stream";
import busboy from "busboy";
import fc from "fast-check";
import { FormData, Response } from "undici";
import { describe, expect, it } from "vitest";
import { multipartBody } from "../services/runner/providers/openai/multipartBody.ts";

/** Every field and file of a multipart body, as busboy (what servers use) reads it. */
function parse(body: Buffer, contentType: string): Promise<Array<[string, string]>> {
  return new Promise((resolve, reject) => {
    const seen: Array<[string, string]> = [];
    const parser = busboy({ headers: { "content-type": contentType } });
    parser.on("field", (name, value) => seen.push([name, value]));
    parser.on("file", (name, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () => seen.push([name, `${info.filename}|${info.mimeType}|${Buffer.concat(chunks).toString("hex")}`]));
    });
    parser.on("error", reject);
    parser.on("close", () => resolve(seen));
    Readable.from([body]).pipe(parser);
  });
}

/** The same fields sent through the platform's own FormData encoder (undici's). */
async function viaPlatform(fields: Array<[string, string]>): Promise<Array<[string, string]>> {
  const form = new FormData();
  for (const [name, value] of fields) form.append(name, value);
  const encoded = new Response(form);
  return parse(Buffer.from(await encoded.arrayBuffer()), encoded.headers.get("content-type") ?? "");
}

describe("multipart body for OpenAI-compatible creates", () => {
  it("any text fields read back exactly as the platform's FormData would send them", async () => {
    const text = fc.string({ unit: "grapheme", maxLength: 40 });
    const withBreaks = fc.oneof(text, fc.constantFrom("a\r\nb", "a\nb", "a\rb", 'say "hi"', "--", "\r\n--x--\r\n", ""));
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom("model", "prompt", "seconds", 'we"ird\nname'), withBreaks), { minLength: 1, maxLength: 5 }), async (fields) => {
        const { body, contentType } = multipartBody(fields);
        expect(await parse(body, contentType)).toEqual(await viaPlatform(fields));
      }),
      { numRuns: 200 },
    );
  });

  it("a file part keeps its bytes, type and name", async () => {
    const bytes = Uint8Array.from([0, 13, 10, 45, 45, 255]);
    const { body, contentType } = multipartBody([["prompt", "a fox"], ["input_reference", { bytes, type: "image/png", name: 'ref"1.png' }]]);
    expect(await parse(body, contentType)).toEqual([
      ["prompt", "a fox"],
      ["input_reference", `ref%221.png|image/png|${Buffer.from(bytes).toString("hex")}`],
    ]);
    const untyped = multipartBody([["input_reference", { bytes, type: "", name: "ref.png" }]]);
    expect((await parse(untyped.body, untyped.contentType))[0]?.[1]).toMatch(/^ref\.png\|application\/octet-stream\|/);
  });
});
