import { describe, expect, it } from "vitest";
import { RATIO_FRAME_SIZES, RATIOS, ReelayConfig, type Ratio } from "../contracts/config.ts";
import { normalizeVideoRequest, type NormalizedVideoRequest } from "../services/edge/video/normalizeRequest.ts";
import { ForbiddenError, ValidationError } from "../services/shared/errors.ts";

/** The shipped model line-up (infra/reelay.config.json) plus a disabled model and one with its own bounds. */
const config: ReelayConfig = ReelayConfig.parse({
  providers: { local: { kind: "local" } },
  videoModels: {
    "VideoModel-2.0": { provider: "local", capabilities: ["image", "video", "audio"], pricePerMillionTokens: 46 },
    "VideoModel-2.0-fast": { provider: "local", capabilities: ["image"], pricePerMillionTokens: 37 },
    "VideoModel-2.0-mini": { provider: "local", capabilities: [], pricePerMillionTokens: 23 },
    "VideoModel-1.0": { provider: "local", enabled: false, capabilities: ["image"], pricePerMillionTokens: 10 },
    "VideoModel-Long": {
      provider: "local",
      pricePerMillionTokens: 50,
      minDurationSeconds: 2,
      maxDurationSeconds: 60,
      defaultDurationSeconds: 10,
    },
  },
});

const IMAGE = "https://example.com/ref.png";
const VIDEO = "https://example.com/ref.mp4";
const AUDIO = "https://example.com/ref.mp3";

/** Runs the normalizer and returns the error it throws, failing the test if it does not throw. */
function rejection(body: unknown): Error {
  try {
    normalizeVideoRequest(body, config);
  } catch (error) {
    if (error instanceof Error) return error;
    throw new Error(`threw a non-Error: ${String(error)}`);
  }
  throw new Error(`expected ${JSON.stringify(body)} to be refused`);
}

const accepted = (body: unknown): NormalizedVideoRequest => normalizeVideoRequest(body, config);

describe("normalizeVideoRequest", () => {
  describe("given only the required fields", () => {
    it("when normalized, then the design.md defaults apply: 5 s, 16:9 at 1280x720, audio on, no watermark", () => {
      const { job, ignoredFields } = accepted({ model: "VideoModel-2.0", prompt: "a red fox in snow" });
      expect(job).toMatchObject({
        model: "VideoModel-2.0",
        provider: "local",
        prompt: "a red fox in snow",
        durationSeconds: 5,
        ratio: "16:9",
        width: 1280,
        height: 720,
        generateAudio: true,
        watermark: false,
        references: {},
      });
      expect(job.references).toEqual({});
      expect(ignoredFields).toEqual([]);
    });

    it("when the model has its own default duration, then that default is used", () => {
      expect(accepted({ model: "VideoModel-Long", prompt: "x" }).job.durationSeconds).toBe(10);
    });
  });

  describe("given each ratio design.md allows", () => {
    const expected: Record<Ratio, [number, number]> = {
      "16:9": [1280, 720],
      "9:16": [720, 1280],
      "1:1": [960, 960],
      "4:3": [1112, 834],
      "3:4": [834, 1112],
      "21:9": [1470, 630],
    };

    it("then exactly those six ratios are accepted", () => {
      expect([...RATIOS].sort()).toEqual(Object.keys(expected).sort());
    });

    it.each(Object.entries(expected))("when ratio is %s, then the frame is %j", (ratio, [width, height]) => {
      const { job } = accepted({ model: "VideoModel-2.0-mini", prompt: "x", ratio });
      expect({ ratio: job.ratio, width: job.width, height: job.height }).toEqual({ ratio, width, height });
      expect(RATIO_FRAME_SIZES[ratio as Ratio]).toEqual({ width, height });
    });
  });

  describe("given explicit optional fields", () => {
    it("when they are valid, then they are carried into the job unchanged", () => {
      const { job } = accepted({
        model: "VideoModel-2.0",
        prompt: "p",
        duration: 15,
        ratio: "9:16",
        resolution: "720p",
        generate_audio: false,
        watermark: true,
      });
      expect(job).toMatchObject({ durationSeconds: 15, ratio: "9:16", width: 720, height: 1280, generateAudio: false, watermark: true });
    });

    it.each([4, 5, 10, 15])("when duration is %i (inside 4–15), then it is accepted", (duration) => {
      expect(accepted({ model: "VideoModel-2.0-fast", prompt: "p", duration }).job.durationSeconds).toBe(duration);
    });

    it("when a model has wider bounds, then the model's bounds apply, not the family's", () => {
      expect(accepted({ model: "VideoModel-Long", prompt: "p", duration: 60 }).job.durationSeconds).toBe(60);
      expect(accepted({ model: "VideoModel-Long", prompt: "p", duration: 2 }).job.durationSeconds).toBe(2);
    });
  });

  describe("given reference fields (spec rule 6: unsupported capabilities are ignored, not refused)", () => {
    const all = { image_url: IMAGE, video_url: VIDEO, audio_url: AUDIO };

    it("when the model supports image, video and audio, then all references are kept and nothing is ignored", () => {
      const { job, ignoredFields } = accepted({ model: "VideoModel-2.0", prompt: "p", ...all });
      expect(job.references).toEqual(all);
      expect(ignoredFields).toEqual([]);
    });

    it("when the model supports only image, then video_url and audio_url are ignored and recorded", () => {
      const { job, ignoredFields } = accepted({ model: "VideoModel-2.0-fast", prompt: "p", ...all });
      expect(job.references).toEqual({ image_url: IMAGE });
      expect(ignoredFields).toEqual(["video_url", "audio_url"]);
    });

    it("when the model supports nothing, then every reference is ignored and the request still succeeds", () => {
      const { job, ignoredFields } = accepted({ model: "VideoModel-2.0-mini", prompt: "p", ...all });
      expect(job.references).toEqual({});
      expect(ignoredFields).toEqual(["image_url", "video_url", "audio_url"]);
    });

    it("when only some references are sent, then only those are considered", () => {
      const { job, ignoredFields } = accepted({ model: "VideoModel-2.0-fast", prompt: "p", audio_url: AUDIO });
      expect(job.references).toEqual({});
      expect(ignoredFields).toEqual(["audio_url"]);
    });

    it("when a reference is a data: URL, then it is accepted", () => {
      const dataUrl = "data:image/png;base64,iVBORw0KGgo=";
      expect(accepted({ model: "VideoModel-2.0", prompt: "p", image_url: dataUrl }).job.references).toEqual({ image_url: dataUrl });
    });

    it("when an unsupported reference is malformed, then it is still refused (validation comes before capability filtering)", () => {
      const error = rejection({ model: "VideoModel-2.0-mini", prompt: "p", video_url: "not a url" });
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toContain("video_url");
    });
  });

  describe("given a model that is not on offer", () => {
    it.each([
      ["disabled in config", "VideoModel-1.0"],
      ["unknown", "VideoModel-9"],
      ["differently cased", "videomodel-2.0"],
      ["an Object.prototype key", "constructor"],
      ["__proto__", "__proto__"],
      ["toString", "toString"],
    ])("when the model is %s, then 403 model not supported naming it", (_label, model) => {
      const error = rejection({ model, prompt: "p" });
      expect(error).toBeInstanceOf(ForbiddenError);
      expect(error).toMatchObject({ status: 403, message: `model not supported: ${model}` });
    });
  });

  describe("given a prompt", () => {
    it.each([
      ["CJK", "一只在雪地里奔跑的红狐狸"],
      ["emoji with ZWJ sequences", "🦊❄️ 👨‍👩‍👧 🏳️‍🌈"],
      ["Arabic (RTL)", "ثعلب أحمر يركض في الثلج"],
      ["Hebrew (RTL) with bidi controls", "\u202Bשועל אדום\u202C in snow"],
      ["combining marks", "e\u0301te\u0301"],
    ])("when it is %s, then it is accepted verbatim", (_label, prompt) => {
      expect(accepted({ model: "VideoModel-2.0-mini", prompt }).job.prompt).toBe(prompt);
    });

    it.each([
      ["empty", ""],
      ["spaces", "   "],
      ["tabs and newlines", "\t\n\r\n"],
      ["an ideographic space", "\u3000"],
    ])("when it is %s, then 400 prompt must not be empty", (_label, prompt) => {
      const error = rejection({ model: "VideoModel-2.0-mini", prompt });
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toBe("prompt must not be empty");
    });

    it("when it is exactly 4000 characters, then it is accepted; at 4001 it is refused naming prompt and the limit", () => {
      expect(accepted({ model: "VideoModel-2.0-mini", prompt: "x".repeat(4000) }).job.prompt).toHaveLength(4000);
      const error = rejection({ model: "VideoModel-2.0-mini", prompt: "x".repeat(4001) });
      expect(error).toBeInstanceOf(ValidationError);
      expect(error.message).toBe("prompt is 4001 characters; the limit is 4000");
    });

    it("when it is 4000 astral characters (8000 UTF-16 units), then it counts as 4000 characters and is accepted", () => {
      expect(accepted({ model: "VideoModel-2.0-mini", prompt: "🦊".repeat(4000) }).job.prompt).toHaveLength(8000);
      expect(rejection({ model: "VideoModel-2.0-mini", prompt: "🦊".repeat(4001) }).message).toBe(
        "prompt is 4001 characters; the limit is 4000",
      );
    });
  });

  describe("given a body that breaks a rule, then a 400 names the field", () => {
    const base = { model: "VideoModel-2.0-mini", prompt: "p" };
    it.each<[string, unknown, string]>([
      ["not an object (array)", [base], "request body must be a JSON object"],
      ["not an object (null)", null, "request body must be a JSON object"],
      ["not an object (string)", "model=VideoModel-2.0", "request body must be a JSON object"],
      ["not an object (number)", 42, "request body must be a JSON object"],
      ["missing model", { prompt: "p" }, "model is required and must be a string"],
      ["model a number", { ...base, model: 2 }, "model is required and must be a string"],
      ["model empty", { ...base, model: "" }, "model must not be empty"],
      ["missing prompt", { model: base.model }, "prompt is required and must be a string"],
      ["prompt an array", { ...base, prompt: ["p"] }, "prompt is required and must be a string"],
      ["duration a float", { ...base, duration: 4.5 }, "duration must be an integer number of seconds"],
      ["duration a string", { ...base, duration: "5" }, "duration must be an integer number of seconds"],
      ["duration null", { ...base, duration: null }, "duration must be an integer number of seconds"],
      ["duration below 4", { ...base, duration: 3 }, "duration must be between 4 and 15 seconds for VideoModel-2.0-mini"],
      ["duration above 15", { ...base, duration: 16 }, "duration must be between 4 and 15 seconds for VideoModel-2.0-mini"],
      ["duration negative", { ...base, duration: -5 }, "duration must be between 4 and 15 seconds"],
      ["duration zero", { ...base, duration: 0 }, "duration must be between 4 and 15 seconds"],
      ["ratio unlisted", { ...base, ratio: "2:1" }, "ratio must be one of 16:9, 9:16, 1:1, 4:3, 3:4, 21:9"],
      ["ratio a number", { ...base, ratio: 1.77 }, "ratio must be one of"],
      ["resolution 1080p", { ...base, resolution: "1080p" }, "resolution must be 720p"],
      ["resolution 720P", { ...base, resolution: "720P" }, "resolution must be 720p"],
      ["resolution a number", { ...base, resolution: 720 }, "resolution must be 720p"],
      ["generate_audio a string", { ...base, generate_audio: "true" }, "generate_audio must be a boolean"],
      ["watermark a number", { ...base, watermark: 0 }, "watermark must be a boolean"],
      ["image_url ftp", { ...base, image_url: "ftp://example.com/a.png" }, "image_url must be an http(s) or data: URL"],
      ["image_url javascript:", { ...base, image_url: "javascript:alert(1)" }, "image_url must be an http(s) or data: URL"],
      ["image_url relative", { ...base, image_url: "/a.png" }, "image_url must be an http(s) or data: URL"],
      ["audio_url an object", { ...base, audio_url: {} }, "audio_url must be a string URL"],
      ["an unknown field", { ...base, seed: 7 }, 'unknown field "seed"'],
      ["a wrongly cased field", { ...base, Prompt: "p" }, 'unknown field "Prompt"'],
      ["several unknown fields", { ...base, seed: 1, fps: 24 }, 'unknown fields "seed", "fps"'],
    ])("when %s", (_label, body, message) => {
      const error = rejection(body);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error).toMatchObject({ status: 400 });
      expect(error.message).toContain(message);
    });

    it("when several fields are wrong, then every one is named in one message", () => {
      const error = rejection({ model: 1, prompt: "", duration: "x", extra: true });
      expect(error.message.split("; ")).toEqual([
        "model is required and must be a string",
        "prompt must not be empty",
        "duration must be an integer number of seconds",
        'unknown field "extra"',
      ]);
    });

    it("when the body smuggles a __proto__ key, then it is an unknown field, not a prototype change", () => {
      const body: unknown = JSON.parse('{"model":"VideoModel-2.0-mini","prompt":"p","__proto__":{"enabled":true}}');
      expect(rejection(body).message).toBe('unknown field "__proto__"');
    });

    it("names an unknown model in 100 characters at most, however long the name sent", () => {
      expect(rejection({ model: "m".repeat(1_000_000), prompt: "p" }).message).toBe(`model not supported: ${"m".repeat(100)}`);
    });

    it("names five unknown fields at most, fifty characters of each, and counts the rest: 60,000 of them made a 700 KB answer", () => {
      const many = Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, i]));
      expect(rejection({ model: "VideoModel-2.0-mini", prompt: "p", ...many }).message).toBe('unknown fields "k0", "k1", "k2", "k3", "k4" and 59995 more');
      const long = "x".repeat(100_000);
      expect(rejection({ model: "VideoModel-2.0-mini", prompt: "p", [long]: 1 }).message).toBe(`unknown field "${"x".repeat(50)}"`);
    });
  });
});
