import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { arkSampleVideo } from "./fakes/arkUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";
import { expectReadyAgain } from "./helpers/readiness.ts";
import { keptFileDescriptors } from "./helpers/keptFiles.ts";

/**
 * The OpenAI Videos API under /api/compat, driven by the official Node SDK (`openai`) as a new user would:
 * base URL and key changed, nothing else. The same tasks as the spec's endpoints, on the same ledger. Tasks
 * run on the instant scripted vendor, which delivers a real 1280×720 H.264 MP4.
 */

/** A 1×1 PNG: the smallest image the renderer takes as a first frame. */
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");

function probe(bytes: Buffer): { width: number; height: number; codec: string } {
  const file = join(mkdtempSync(join(tmpdir(), "reelay-sdk-")), "video.mp4");
  writeFileSync(file, bytes);
  const out = JSON.parse(execFileSync("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json", file], { encoding: "utf8" })) as {
    streams: Array<{ width: number; height: number; codec_name: string }>;
  };
  const stream = out.streams[0];
  return { width: stream?.width ?? 0, height: stream?.height ?? 0, codec: stream?.codec_name ?? "" };
}

describe("OpenAI Videos API through the official Node SDK", () => {
  let app: TestApp;
  let limited: TestApp;
  let client: OpenAI;
  let key: string;

  const vendor = new ScriptedVendor({}, arkSampleVideo());

  beforeAll(async () => {
    [app, limited] = await Promise.all([
      startTestApp({ providers: () => vendor }),
      startTestApp({
        services: ["edge"],
        tweak: (config) => {
          config.limits.requestsPerSecondPerKey = 0.001;
          config.limits.burstPerKey = 1;
        },
      }),
    ]);
    key = await app.keyFor("sdk-videos", 100);
    client = new OpenAI({ apiKey: key, baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
  });
  afterAll(async () => {
    await Promise.all([app?.stop(), limited?.stop()]);
    // The edge let go of the videos it kept on its disk (one left open holds its disk space until collected).
    expect(keptFileDescriptors()).toEqual([]);
  });

  const waitForCompleted = async (id: string) => {
    for (let i = 0; i < 300; i++) {
      const video = await client.videos.retrieve(id);
      if (video.status === "completed" || video.status === "failed") return video;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`video ${id} did not finish`);
  };

  it("create (multipart, with input_reference) → retrieve until completed → downloadContent is a 720p MP4 → list finds it; the spec's query sees the same task", async () => {
    const created = await client.videos.create({
      model: "VideoModel-2.0",
      prompt: "a fox",
      seconds: "4",
      size: "1280x720",
      input_reference: await toFile(PNG, "first-frame.png", { type: "image/png" }),
    });
    expect(created).toMatchObject({ object: "video", status: "queued", model: "VideoModel-2.0", prompt: "a fox", seconds: "4", size: "1280x720", progress: 0, error: null, remixed_from_video_id: null });
    expect(created.id).toMatch(/^video_\d+$/);
    const done = await waitForCompleted(created.id);
    expect(done).toMatchObject({ status: "completed", progress: 100, seconds: "4", size: "1280x720" });
    expect(done.completed_at).toBeGreaterThanOrEqual(done.created_at);
    expect(done.expires_at).toBe((done.completed_at ?? 0) + 30 * 86_400);

    const content = await client.videos.downloadContent(created.id);
    expect(content.headers.get("content-type")).toBe("video/mp4");
    expect(probe(Buffer.from(await content.arrayBuffer()))).toEqual({ width: 1280, height: 720, codec: "h264" });

    const listed = [];
    for await (const video of client.videos.list({ limit: 2 })) listed.push(video.id);
    expect(listed).toContain(created.id);

    const taskId = Number(created.id.slice("video_".length));
    const spec = await new VideoClient(app.baseUrl, key).query(taskId);
    expect(spec.body.data).toMatchObject({ task_id: taskId, status: "success", duration: 4, resolution: "1280*720" });

    // The uploaded file was given to the generator as the task's image reference, and kept only while the task needed it.
    const { events } = await readTask(app.nats, taskId);
    const submitted = events.find((event) => event.type === "TaskSubmitted");
    const imageUrl = submitted?.type === "TaskSubmitted" ? submitted.data.job.references.image_url : undefined;
    expect(imageUrl).toMatch(/\/references\/ref-[0-9a-f-]{36}\.png$/);
    await expect.poll(async () => (await fetch(String(imageUrl))).status).toBe(404);
  });

  it("the content endpoint serves byte ranges", async () => {
    const created = await client.videos.create({ model: "VideoModel-2.0-mini", prompt: "ranges", seconds: "4", size: "720x1280" });
    await waitForCompleted(created.id);
    const answer = await fetch(`${app.baseUrl}/api/compat/videos/${created.id}/content?variant=video`, { headers: { authorization: `Bearer ${key}`, range: "bytes=0-7" } });
    expect(answer.status).toBe(206);
    expect(Buffer.from(await answer.arrayBuffer()).subarray(4, 8).toString()).toBe("ftyp");
  });

  it("lists in cursor pages, newest first or oldest first", async () => {
    const lister = new OpenAI({ apiKey: await app.keyFor("sdk-pages", 100), baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await lister.videos.create({ model: "VideoModel-2.0-mini", prompt: `page ${i}`, seconds: "4" })).id);
    // The list is a read model (docs/decisions.md, "Task list"): a task appears in it a moment after its create.
    await expect.poll(async () => (await lister.videos.list({ limit: 100 })).data.length, { timeout: 5000, interval: 20 }).toBe(3);
    const first = await lister.videos.list({ limit: 2 });
    expect(first.data.map((video) => video.id)).toEqual([ids[2], ids[1]]);
    expect(first.has_more).toBe(true);
    const second = await first.getNextPage();
    expect(second.data.map((video) => video.id)).toEqual([ids[0]]);
    const ascending = await lister.videos.list({ order: "asc" });
    expect(ascending.data.map((video) => video.id)).toEqual(ids);
  });

  it("each error is the SDK's typed exception, in OpenAI's shape", async () => {
    await expect(client.videos.create({ model: "VideoModel-2.0", prompt: "x", size: "1024x1792" })).rejects.toMatchObject({
      constructor: OpenAI.BadRequestError,
      status: 400,
      param: "size",
      message: expect.stringMatching(/size must be one of 1280x720, 720x1280, 960x960, 1112x834, 834x1112, 1470x630/),
    });
    // The SDK types seconds as "4", "8" or "12"; reelay takes the model's bounds (4–15 here) and names them.
    await expect(client.videos.create({ model: "VideoModel-2.0", prompt: "x", seconds: "20" as "12" })).rejects.toMatchObject({ constructor: OpenAI.BadRequestError, param: "seconds", message: expect.stringMatching(/seconds must be between 4 and 15/) });
    await expect(client.videos.create({ model: "sora-2", prompt: "x" })).rejects.toMatchObject({ constructor: OpenAI.NotFoundError, code: "model_not_found" });
    await expect(client.videos.retrieve("video_999999999")).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.videos.retrieve("not-a-video")).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const stranger = new OpenAI({ apiKey: "rly_not_a_key", baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
    await expect(stranger.videos.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const poor = new OpenAI({ apiKey: await app.keyFor("sdk-poor", 0), baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
    await expect(poor.videos.create({ model: "VideoModel-2.0", prompt: "x" })).rejects.toMatchObject({ constructor: OpenAI.RateLimitError, status: 429, type: "insufficient_quota", code: "insufficient_quota" });
    const hurried = new OpenAI({ apiKey: await limited.keyFor("sdk-hurried", 10), baseURL: `${limited.baseUrl}/api/compat`, maxRetries: 0 });
    await hurried.videos.list().catch(() => undefined);
    await expect(hurried.videos.list()).rejects.toBeInstanceOf(OpenAI.RateLimitError);
  });

  it("another account's video is not found, through either API", async () => {
    const created = await client.videos.create({ model: "VideoModel-2.0-mini", prompt: "mine", seconds: "4" });
    const other = new OpenAI({ apiKey: await app.keyFor("sdk-other", 10), baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
    await expect(other.videos.retrieve(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(other.videos.downloadContent(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const spec = await new VideoClient(app.baseUrl, await app.keyFor("sdk-other-spec", 10)).query(Number(created.id.slice(6)));
    expect(spec.status).toBe(404);
  });

  it("thumbnail and spritesheet are made once from the stored video with ffmpeg; a failed video has no content", async () => {
    const created = await client.videos.create({ model: "VideoModel-2.0-mini", prompt: "stills", seconds: "4", size: "1280x720" });
    await waitForCompleted(created.id);
    const thumbnail = Buffer.from(await (await client.videos.downloadContent(created.id, { variant: "thumbnail" })).arrayBuffer());
    expect([thumbnail.subarray(0, 4).toString(), thumbnail.subarray(8, 12).toString()]).toEqual(["RIFF", "WEBP"]);
    const again = Buffer.from(await (await client.videos.downloadContent(created.id, { variant: "thumbnail" })).arrayBuffer());
    expect(again.equals(thumbnail)).toBe(true);
    const sprites = await client.videos.downloadContent(created.id, { variant: "spritesheet" });
    expect(sprites.headers.get("content-type")).toBe("image/jpeg");
    expect(Buffer.from(await sprites.arrayBuffer()).subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));

    vendor.generation = { kind: "fail", after: 1, reason: "the video could not be generated" };
    const failing = await client.videos.create({ model: "VideoModel-2.0", prompt: "broken" });
    const failed = await waitForCompleted(failing.id);
    vendor.generation = { kind: "succeed", after: 1 };
    expect(failed).toMatchObject({ status: "failed", error: { code: "video_generation_failed", message: "the video could not be generated" } });
    await expect(client.videos.downloadContent(failed.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it("remix makes a new task with the source video as its video reference; a model without video references refuses", async () => {
    const source = await client.videos.create({ model: "VideoModel-2.0", prompt: "the original", seconds: "4", size: "720x1280" });
    await waitForCompleted(source.id);
    const remix = await client.videos.remix(source.id, { prompt: "the same, at night" });
    expect(remix).toMatchObject({ remixed_from_video_id: source.id, prompt: "the same, at night", seconds: "4", size: "720x1280", model: "VideoModel-2.0" });
    expect(await waitForCompleted(remix.id)).toMatchObject({ status: "completed" });
    const { events } = await readTask(app.nats, Number(remix.id.slice(6)));
    const submitted = events.find((event) => event.type === "TaskSubmitted");
    expect(submitted?.type === "TaskSubmitted" && submitted.data.job).toMatchObject({ remixOf: Number(source.id.slice(6)), references: { video_url: expect.stringMatching(/\/videos\/[^/]+\.mp4$/) } });

    const plain = await client.videos.create({ model: "VideoModel-2.0-mini", prompt: "text only", seconds: "4" });
    await waitForCompleted(plain.id);
    await expect(client.videos.remix(plain.id, { prompt: "again" })).rejects.toMatchObject({ constructor: OpenAI.BadRequestError, code: "remix_not_supported" });
  });

  it("delete: the stored files go, the task and its charge stay for audit; the video is then not found", async () => {
    const deleterKey = await app.keyFor("sdk-delete", 100);
    const deleter = new OpenAI({ apiKey: deleterKey, baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
    const created = await deleter.videos.create({ model: "VideoModel-2.0-mini", prompt: "to delete", seconds: "4" });
    for (let i = 0; i < 300 && (await deleter.videos.retrieve(created.id)).status !== "completed"; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    await deleter.videos.downloadContent(created.id, { variant: "thumbnail" });
    const taskId = Number(created.id.slice(6));
    const spec = new VideoClient(app.baseUrl, deleterKey);
    const before = await spec.query(taskId);
    const videoUrl = String(before.body.data?.video_url);
    await expect.poll(async () => (await app.ledger.current("sdk-delete")).reservedMicros).toBe(0);
    const balance = (await app.ledger.current("sdk-delete")).balanceMicros;

    expect(await deleter.videos.delete(created.id)).toEqual({ id: created.id, object: "video.deleted", deleted: true });
    await expect.poll(async () => (await fetch(videoUrl)).status).toBe(404);
    await expect.poll(() => deleter.videos.retrieve(created.id).then(() => "found", (error: unknown) => (error instanceof OpenAI.NotFoundError ? "gone" : "other"))).toBe("gone");
    await expect(deleter.videos.downloadContent(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(deleter.videos.delete(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // The projector no longer holds a final view once it is written: the deletion is folded onto the stored one.
    await expect.poll(async () => (await app.nats.taskViews.get(String(taskId)))?.json<{ deletedAt?: string; video?: unknown }>()).toMatchObject({ deletedAt: expect.any(String) });
    expect((await app.nats.taskViews.get(String(taskId)))?.json<{ video?: unknown }>().video).toBeUndefined();
    const after = await spec.query(taskId);
    expect(after.body.data).toMatchObject({ task_id: taskId, status: "success", total_tokens: before.body.data?.total_tokens });
    expect((await app.ledger.current("sdk-delete")).balanceMicros).toBe(balance);
    const { events } = await readTask(app.nats, taskId);
    expect(events.map((event) => event.type)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationSucceeded", "VideoDeleted"]);
  });

  it("Idempotency-Key: a repeated create answers the same video and reserves once", async () => {
    const account = "sdk-idempotent";
    const idempotent = new OpenAI({ apiKey: await app.keyFor(account, 100), baseURL: `${app.baseUrl}/api/compat`, maxRetries: 0 });
    const params = { model: "VideoModel-2.0-mini", prompt: "only once", seconds: "4" as const };
    const first = await idempotent.videos.create(params, { headers: { "Idempotency-Key": "create-once-1" } });
    const again = await idempotent.videos.create(params, { headers: { "Idempotency-Key": "create-once-1" } });
    expect(again.id).toBe(first.id);
    // The index is a read model: it lists the task once the projector has reached it.
    await expect.poll(async () => (await idempotent.videos.list()).data.map((video) => video.id)).toEqual([first.id]);
  });

  it("a task created through the spec's endpoint is a video object too", async () => {
    const spec = await new VideoClient(app.baseUrl, key).create({ model: "VideoModel-2.0-mini", prompt: "from the spec", duration: 5, ratio: "1:1" });
    const video = await client.videos.retrieve(`video_${spec.body.data?.task_id}`);
    expect(video).toMatchObject({ prompt: "from the spec", seconds: "5", size: "960x960", model: "VideoModel-2.0-mini" });
  });

  /** Hostile creates: whatever the body, a clear 4xx in OpenAI's shape, nothing reserved, the edge keeps serving. */
  describe("OpenAI Videos API: bad multipart and bad fields", () => {
    let key: string;
    const BOUNDARY = "----reelayboundary7MA4YWxkTrZu0gW";

    beforeAll(async () => {
      key = await app.keyFor("hostile", 100);
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
      // Busboy destroys the open file's stream then: unheard, its error was an uncaught exception that ended the edge.
      ["a body that ends inside a file", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a fox"), part("input_reference", Buffer.alloc(64, 7), "x.png")).subarray(0, -40), multipart), 400, /malformed multipart\/form-data: Unexpected end of form/],
      ["a body that ends inside a field sent as a file", () => post(form(part("model", "VideoModel-2.0"), part("prompt", "a fox in the snow", "prompt.txt")).subarray(0, -30), multipart), 400, /malformed multipart\/form-data: Unexpected end of form/],
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
        { numRuns: 40 },
      );
      await expectReadyAgain(app.baseUrl);
    });
  });
});
