import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * Hostile creates on POST /api/compat/videos: whatever the body, a clear 4xx in OpenAI's shape, nothing
 * reserved, and the edge keeps serving. Multipart is parsed by busboy under limits on parts, fields and size.
 */
describe("OpenAI Videos API: bad multipart and bad fields", () => {
  let app: TestApp;
  let key: string;
  const BOUNDARY = "----reelayboundary7MA4YWxkTrZu0gW";

  beforeAll(async () => {
    app = await startTestApp({ services: ["edge"] });
    key = await app.keyFor("hostile", 100);
  });
  afterAll(async () => {
    await app?.stop();
  });

  const post = async (body: Buffer | string, contentType: string) => {
    const answer = await fetch(`${app.baseUrl}/api/compat/videos`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": contentType }, body: typeof body === "string" ? body : new Uint8Array(body) });
    return { status: answer.status, body: (await answer.json()) as { error?: { message: string; param?: string | null; code?: string | null } } };
  };
  const part = (name: string, value: string | Buffer, filename?: string) =>
    Buffer.concat([
      Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"\r\nContent-Type: application/octet-stream` : ""}\r\n\r\n`),
      Buffer.isBuffer(value) ? value : Buffer.from(value),
      Buffer.from("\r\n"),
    ]);
  const form = (...parts: Buffer[]) => Buffer.concat([...parts, Buffer.from(`--${BOUNDARY}--\r\n`)]);
  const multipart = `multipart/form-data; boundary=${BOUNDARY}`;
  const untouched = async () => {
    const state = await app.ledger.current("hostile");
    expect([state.balanceMicros, state.reservedMicros]).toEqual([100_000_000, 0]);
  };

  it.each([
    ["a content type that is neither multipart nor JSON", () => post("model=x", "application/x-www-form-urlencoded"), 400, /Content-Type must be multipart\/form-data or application\/json/],
    ["multipart without a boundary", () => post(form(part("model", "VideoModel-2.0")), "multipart/form-data"), 400, /malformed multipart\/form-data/],
    ["a truncated multipart body", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a fox")).subarray(0, 90), multipart), 400, /malformed multipart\/form-data|prompt is required/],
    ["an unknown field", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a fox"), part("quality", "hd")), multipart), 400, /unknown field "quality"/],
    ["a field given twice", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a"), part("prompt", "b")), multipart), 400, /field "prompt" is given more than once/],
    ["too many parts", () => post(form(...Array.from({ length: 9 }, (_, i) => part("prompt", `p${i}`))), multipart), 400, /too many parts|more than once/],
    ["a file under another name", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a"), part("image", Buffer.from("x"), "x.png")), multipart), 400, /unknown file field "image"/],
    ["an input_reference that is not an image", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a"), part("input_reference", Buffer.from("#EXTM3U\nfile:///etc/passwd"), "x.png")), multipart), 400, /input_reference must be a PNG, JPEG, GIF or WebP image/],
    ["an input_reference larger than 10 MiB", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a"), part("input_reference", Buffer.alloc(10 * 1024 * 1024 + 1), "big.png")), multipart), 413, /input_reference is larger than 10485760 bytes/],
    ["a prompt field longer than the limit", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "x".repeat(40_000))), multipart), 413, /field "prompt" is longer than/],
    ["JSON that is not an object", () => post("[1,2]", "application/json"), 400, /request body must be a JSON object/],
    ["JSON with file_id", () => post(JSON.stringify({ model: "VideoModel-2.0", prompt: "a", input_reference: { file_id: "file_1" } }), "application/json"), 400, /file_id is not supported/],
  ])("%s: a clear 4xx naming it, nothing reserved", async (_name, send, status, message) => {
    const answer = await send();
    expect(answer.status).toBe(status);
    expect(answer.body.error?.message).toMatch(message);
    await untouched();
  });

  it("JSON creates work as well as multipart, with input_reference as an image_url", async () => {
    const answer = await post(JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "json", seconds: 4, size: "960x960" }), "application/json");
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ object: "video", seconds: "4", size: "960x960" });
  });

  it("random bytes as a multipart body never crash the edge and always answer 4xx", async () => {
    const keyForProperty = await app.keyFor("hostile-random", 100);
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), fc.boolean(), async (bytes, framed) => {
        const body = framed ? Buffer.concat([Buffer.from(`--${BOUNDARY}\r\n`), Buffer.from(bytes)]) : Buffer.from(bytes);
        const answer = await fetch(`${app.baseUrl}/api/compat/videos`, { method: "POST", headers: { authorization: `Bearer ${keyForProperty}`, "content-type": multipart }, body });
        await answer.arrayBuffer();
        expect(answer.status).toBeGreaterThanOrEqual(400);
        expect(answer.status).toBeLessThan(500);
      }),
      { numRuns: 60 },
    );
    expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
  });
});
