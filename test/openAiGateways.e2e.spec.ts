import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { arkSampleVideo } from "./fakes/arkUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { goHeaders, goMultipart, httpxHeaders, httpxMultipart, replay, type LoggedRequest } from "./gateways/requestLogs.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * The OpenAI API at `/v1`, as software nobody here wrote calls it: the official Node SDK with a base URL
 * ending in `/v1`, and the requests new-api's Sora channel and LiteLLM's OpenAI video provider send (their
 * request logs, written down from their source in gateways/requestLogs.ts), replayed against a real reelay.
 * Tasks run on the instant scripted vendor, which delivers a real 1280×720 H.264 MP4.
 */

/** A 1×1 PNG: the smallest image the renderer takes as a first frame. */
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");

/** What new-api's Go struct (`responseTask`) needs to read an answer: a wrong type fails its json.Unmarshal. */
const NewApiTask = z.object({
  id: z.string().min(1),
  status: z.string(),
  progress: z.number().int(),
  created_at: z.number().int(),
  completed_at: z.number().int().nullable(),
  expires_at: z.number().int().nullable(),
  seconds: z.string(),
  size: z.string(),
  remixed_from_video_id: z.string().nullable(),
  error: z.object({ message: z.string(), code: z.string() }).nullable(),
});

const isMp4 = (bytes: Buffer) => bytes.length > 10_000 && bytes.subarray(4, 8).toString() === "ftyp";

describe("the OpenAI API at /v1", () => {
  let app: TestApp;
  let key: string;
  const vendor = new ScriptedVendor({}, arkSampleVideo());

  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor });
    key = await app.keyFor("gateways", 1000);
  });
  afterAll(async () => {
    await app?.stop();
  });

  const send = (request: LoggedRequest, base = app.baseUrl) => replay(base, request);
  const json = (body: Buffer): unknown => JSON.parse(body.toString());

  describe("through the official Node SDK with baseURL …/v1", () => {
    let client: OpenAI;
    beforeAll(() => {
      client = new OpenAI({ apiKey: key, baseURL: `${app.baseUrl}/v1`, maxRetries: 0 });
    });

    it("chat completions (whole and streamed) and the model list answer as under /api/compat", async () => {
      const whole = await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "hello from v1" }] });
      expect(whole.choices[0]?.message.content).toBe("hello from v1");
      const stream = await client.chat.completions.create({ model: "echo", stream: true, messages: [{ role: "user", content: "one two" }] });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      expect(text.trim()).toBe("one two");
      const models = [];
      for await (const model of client.models.list()) models.push(model.id);
      expect(models).toContain("echo");
      expect(await client.models.retrieve("echo")).toMatchObject({ id: "echo", object: "model" });
    });

    it("videos: create with a file → retrieve until completed → downloadContent (an MP4) → list → remix → delete", async () => {
      const created = await client.videos.create({ model: "VideoModel-2.0", prompt: "a fox at v1", seconds: "4", size: "1280x720", input_reference: await toFile(PNG, "first-frame.png", { type: "image/png" }) });
      expect(created).toMatchObject({ object: "video", status: "queued", model: "VideoModel-2.0" });
      let video = created;
      for (let i = 0; i < 300 && video.status !== "completed" && video.status !== "failed"; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        video = await client.videos.retrieve(created.id);
      }
      expect(video.status).toBe("completed");
      expect(isMp4(Buffer.from(await (await client.videos.downloadContent(created.id)).arrayBuffer()))).toBe(true);
      const page = await client.videos.list({ limit: 5 });
      expect(page.data.map((entry) => entry.id)).toContain(created.id);
      const remix = await client.videos.remix(created.id, { prompt: "the same fox, at night" });
      expect(remix).toMatchObject({ remixed_from_video_id: created.id, model: "VideoModel-2.0" });
      expect(await client.videos.delete(created.id)).toMatchObject({ id: created.id, deleted: true });
      await expect(client.videos.retrieve(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    });

    it("errors are OpenAI's: an unknown path lists what is served, an empty balance is 429 insufficient_quota, a bad key 401", async () => {
      const unknown = await send({ method: "POST", path: "/v1/responses", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: Buffer.from("{}") });
      expect(unknown.status).toBe(404);
      const { error } = json(unknown.body) as { error: { message: string; type: string; code: string } };
      expect(error).toMatchObject({ type: "invalid_request_error", code: "unknown_url" });
      expect(error.message).toMatch(/^Unknown request URL: POST \/v1\/responses\. .*under \/v1 and \/api\/compat: POST \/chat\/completions, GET \/models, POST \/videos, GET \/videos, GET \/videos\/\{id\}, GET \/videos\/\{id\}\/content, DELETE \/videos\/\{id\}, POST \/videos\/\{id\}\/remix\.$/);

      const poor = new OpenAI({ apiKey: await app.keyFor("gateways-poor", 0), baseURL: `${app.baseUrl}/v1`, maxRetries: 0 });
      await expect(poor.videos.create({ model: "VideoModel-2.0", prompt: "x" })).rejects.toMatchObject({ constructor: OpenAI.RateLimitError, status: 429, type: "insufficient_quota", code: "insufficient_quota" });
      await expect(poor.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ constructor: OpenAI.RateLimitError, code: "insufficient_quota" });
      const stranger = new OpenAI({ apiKey: "rly_not_a_key", baseURL: `${app.baseUrl}/v1`, maxRetries: 0 });
      await expect(stranger.videos.list()).rejects.toMatchObject({ constructor: OpenAI.AuthenticationError, code: "invalid_api_key" });
    });
  });

  describe("new-api's Sora channel, pointed at http://host:port (it appends /v1)", () => {
    const poll = async (id: string) => {
      for (let i = 0; i < 300; i++) {
        const answer = await send({ method: "GET", path: `/v1/videos/${id}`, headers: goHeaders(key) });
        expect(answer.status).toBe(200);
        const task = NewApiTask.parse(json(answer.body));
        if (task.status === "completed" || task.status === "failed") return task;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`${id} did not finish`);
    };

    it("creates (multipart as Go writes it), polls, downloads through its video proxy, remixes with the model it adds", async () => {
      const form = goMultipart(
        [["model", "VideoModel-2.0"], ["prompt", "a fox through new-api"], ["seconds", "4"], ["size", "1280x720"]],
        [{ name: "input_reference", filename: "first-frame.png", type: "image/png", bytes: PNG }],
      );
      const created = await send({ method: "POST", path: "/v1/videos", headers: { ...goHeaders(key), "content-type": form.contentType }, body: form.body });
      expect(created.status).toBe(200);
      const upstreamId = NewApiTask.parse(json(created.body)).id;
      expect((await poll(upstreamId)).status).toBe("completed");

      const content = await send({ method: "GET", path: `/v1/videos/${upstreamId}/content`, headers: goHeaders(key) });
      expect(content.status).toBe(200);
      expect(content.headers.get("content-type")).toBe("video/mp4");
      expect(isMp4(content.body)).toBe(true);

      // new-api relays the client's JSON remix body with `model` set to the channel's model name.
      const remix = await send({ method: "POST", path: `/v1/videos/${upstreamId}/remix`, headers: { ...goHeaders(key), "content-type": "application/json" }, body: Buffer.from(JSON.stringify({ prompt: "at night", model: "VideoModel-2.0" })) });
      expect(remix.status).toBe(200);
      expect(NewApiTask.parse(json(remix.body))).toMatchObject({ remixed_from_video_id: upstreamId });
    });

    it("creates from a JSON body with the model it sets, and a failed task reads as new-api's failure with a reason", async () => {
      const body = Buffer.from(JSON.stringify({ prompt: "a text-only fox", seconds: "4", size: "720x1280", model: "VideoModel-2.0-mini" }));
      const created = await send({ method: "POST", path: "/v1/videos", headers: { ...goHeaders(key), "content-type": "application/json" }, body });
      expect(created.status).toBe(200);
      expect((await poll(NewApiTask.parse(json(created.body)).id)).status).toBe("completed");

      vendor.generation = { kind: "fail", after: 1, reason: "the video could not be generated" };
      try {
        const failing = await send({ method: "POST", path: "/v1/videos", headers: { ...goHeaders(key), "content-type": "application/json" }, body });
        const failed = await poll(NewApiTask.parse(json(failing.body)).id);
        expect(failed).toMatchObject({ status: "failed", error: { message: "the video could not be generated" } });
      } finally {
        vendor.generation = { kind: "succeed", after: 1 };
      }
    });
  });

  describe("LiteLLM's OpenAI video provider, api_base http://host:port/v1", () => {
    it("create (httpx multipart) → status → content?video_id → list → remix → delete", async () => {
      const base = `${app.baseUrl}/v1`;
      const form = httpxMultipart(
        [["model", "VideoModel-2.0"], ["prompt", "a fox through LiteLLM"], ["seconds", "4"], ["size", "1280x720"]],
        [{ name: "input_reference", filename: "input_reference.png", type: "image/png", bytes: PNG }],
      );
      const created = await send({ method: "POST", path: "/videos", headers: { ...httpxHeaders(key), "content-type": form.contentType }, body: form.body }, base);
      expect(created.status).toBe(200);
      const { id } = json(created.body) as { id: string };
      let status = "queued";
      for (let i = 0; i < 300 && status !== "completed" && status !== "failed"; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        status = (json((await send({ method: "GET", path: `/videos/${id}`, headers: httpxHeaders(key) }, base)).body) as { status: string }).status;
      }
      expect(status).toBe("completed");
      const content = await send({ method: "GET", path: `/videos/${id}/content?video_id=${id}`, headers: httpxHeaders(key) }, base);
      expect(content.status).toBe(200);
      expect(isMp4(content.body)).toBe(true);
      const list = await send({ method: "GET", path: "/videos?limit=10&order=desc", headers: httpxHeaders(key) }, base);
      expect((json(list.body) as { data: Array<{ id: string }> }).data.map((video) => video.id)).toContain(id);
      const remix = await send({ method: "POST", path: `/videos/${id}/remix`, headers: { ...httpxHeaders(key), "content-type": "application/json" }, body: Buffer.from(JSON.stringify({ prompt: "at dawn" })) }, base);
      expect(remix.status).toBe(200);
      const deleted = await send({ method: "DELETE", path: `/videos/${id}`, headers: httpxHeaders(key) }, base);
      expect(json(deleted.body)).toEqual({ id, object: "video.deleted", deleted: true });
    });
  });
});
