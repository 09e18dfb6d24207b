import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FFMPEG, locateProgram } from "../infra/binaries.ts";
import { renderVideo } from "../services/runner/providers/local/render.ts";
import { MAX_IMAGE_SIDE } from "../services/shared/imageDimensions.ts";
import { arkSampleVideo } from "./fakes/arkUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * A PNG that declares `width`×`height` in its header, as the 420 KB 12000×12000 PNG of the finding did:
 * the header is all that is read before the refusal, so the pixels need not be there.
 */
function declaredPng(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.writeUInt8(8, 8); // bit depth
  ihdr.writeUInt8(2, 9); // truecolour
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IEND", Buffer.alloc(0))]);
}

/** Issue 32, part C: what one customer's reference or thumbnail request can make a render cost. */
describe("adversarial renders", () => {
  let app: TestApp;
  let client: OpenAI;

  beforeAll(async () => {
    app = await startTestApp({ providers: () => new ScriptedVendor({}, arkSampleVideo()) });
    client = new OpenAI({ apiKey: await app.keyFor("renders", 100), baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
  });
  afterAll(async () => app?.stop());

  it("a small PNG declaring 12000×12000 is refused at create with a 400 naming the limit (was decoded: ffmpeg peaked at 631 MiB)", async () => {
    const error = await client.videos
      .create({ model: "VideoModel-2.0", prompt: "huge", input_reference: await toFile(declaredPng(12_000, 12_000), "huge.png", { type: "image/png" }) })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ param: "input_reference", code: "image_too_large", message: expect.stringMatching(`input_reference is 12000×12000 pixels; the limit is ${MAX_IMAGE_SIDE}×${MAX_IMAGE_SIDE}`) });
  });

  it("the renderer refuses such a reference by its header before ffmpeg decodes it (an image_url fetched at run time)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reelay-huge-"));
    const imagePath = join(dir, "huge.png");
    writeFileSync(imagePath, declaredPng(MAX_IMAGE_SIDE + 1, 100));
    const ffmpegPath = locateProgram(FFMPEG, () => {});
    const render = renderVideo({ ffmpegPath, outputPath: join(dir, "out.mp4"), width: 1280, height: 720, durationSeconds: 1, prompt: "p", generateAudio: false, watermark: false, preset: "ultrafast", imagePath });
    await expect(render).rejects.toThrow(`image_url is ${MAX_IMAGE_SIDE + 1}×100 pixels; the limit is ${MAX_IMAGE_SIDE}×${MAX_IMAGE_SIDE}`);
  });

  it("concurrent thumbnail requests for one video start one ffmpeg (was one per request until stored)", async () => {
    const created = await client.videos.create({ model: "VideoModel-2.0-mini", prompt: "thumbs", seconds: "4" });
    await expect.poll(async () => (await client.videos.retrieve(created.id)).status, { timeout: 15_000 }).toBe("completed");
    // Every ffmpeg run ends in a put of the still: count them.
    const watch = await app.nats.videos.watch({ includeHistory: false });
    const stills: string[] = [];
    void (async () => {
      for await (const info of watch) if (info.name.startsWith("thumb-")) stills.push(info.name);
    })();
    const answers = await Promise.all(Array.from({ length: 8 }, () => client.videos.downloadContent(created.id, { variant: "thumbnail" }).then((r) => r.arrayBuffer())));
    expect(new Set(answers.map((bytes) => Buffer.from(bytes).toString("base64"))).size).toBe(1);
    await expect.poll(() => stills.length).toBeGreaterThanOrEqual(1);
    // A second thumbnail put would have arrived with the answers that waited for it.
    expect(stills).toHaveLength(1);
    watch.stop();
  });
});
