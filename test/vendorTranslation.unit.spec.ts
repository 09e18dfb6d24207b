import fc from "fast-check";
import { decodeJwt, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { classifyDashScope, DashScopeTask } from "../services/runner/providers/dashscope/dashscopeApi.ts";
import { dashScopeStatusOf } from "../services/runner/providers/dashscope/dashscopeStatus.ts";
import { classifyKling, createBody as klingBody, KlingTask, klingImageOf, readKlingError } from "../services/runner/providers/kling/klingApi.ts";
import { klingStatusOf } from "../services/runner/providers/kling/klingStatus.ts";
import { KlingToken } from "../services/runner/providers/kling/klingToken.ts";
import { createBody as miniMaxBody, MiniMaxTask, readMiniMaxError } from "../services/runner/providers/minimax/minimaxApi.ts";
import { miniMaxProgressOf } from "../services/runner/providers/minimax/minimaxStatus.ts";
import { ProviderRejected } from "../services/runner/providers/types.ts";
import type { VendorModel } from "../services/runner/providers/vendor/vendorModels.ts";
import { classifyGoogle, createBody as veoBody, readGoogleError, VeoOperation } from "../services/runner/providers/veo/veoApi.ts";
import { veoProgressOf } from "../services/runner/providers/veo/veoStatus.ts";
import { sampleJob } from "./helpers/fixtures.ts";

const model: VendorModel = { upstreamModel: "m", imageRole: "first_frame", capabilities: ["image"], upstreamPrice: 0.5 };
const ds = (output: Record<string, unknown>, usage?: Record<string, unknown>) => DashScopeTask.parse({ output: { task_id: "t", ...output }, ...(usage ? { usage } : {}) });
const kt = (fields: Record<string, unknown>) => KlingTask.parse({ task_id: "k", ...fields });
const mm = (fields: Record<string, unknown>) => MiniMaxTask.parse({ task_id: "m", ...fields });
const op = (fields: Record<string, unknown>) => VeoOperation.parse({ name: "models/veo/operations/1", ...fields });

describe("DashScope translation", () => {
  it("maps every task status; the failure's code and message come from inside output; usage read as numbers or strings", () => {
    expect(dashScopeStatusOf(ds({ task_status: "PENDING" }), model, "t")).toEqual({ state: "queued" });
    expect(dashScopeStatusOf(ds({ task_status: "RUNNING" }), model, "t")).toEqual({ state: "running" });
    expect(dashScopeStatusOf(ds({ task_status: "SUSPENDED" }), model, "t")).toEqual({ state: "running" });
    expect(dashScopeStatusOf(ds({ task_status: "SUCCEEDED", video_url: "https://oss/x.mp4" }, { video_duration: "10", video_count: "1", SR: "720" }), model, "t")).toEqual({
      state: "succeeded",
      result: { kind: "url", url: "https://oss/x.mp4" },
      durationSeconds: 10,
      upstreamUsage: { unit: "seconds", amount: 10, costMicros: 5_000_000 },
    });
    // wan2.7 bills input and output seconds together as `duration`; the video is the output's length.
    expect(dashScopeStatusOf(ds({ task_status: "SUCCEEDED", video_url: "u" }, { duration: 15, output_video_duration: 10 }), model, "t")).toMatchObject({ durationSeconds: 10, upstreamUsage: { amount: 15 } });
    expect(dashScopeStatusOf(ds({ task_status: "SUCCEEDED" }), model, "t")).toMatchObject({ state: "failed", reason: expect.stringMatching(/without a video/) });
    expect(dashScopeStatusOf(ds({ task_status: "FAILED", code: "DataInspectionFailed", message: "Output data may contain inappropriate content." }), model, "t")).toMatchObject({ reason: expect.stringMatching(/content policy/) });
    expect(dashScopeStatusOf(ds({ task_status: "FAILED", code: "InternalError.Algo", message: "The input image is too small." }), model, "t")).toMatchObject({ reason: "video generation failed upstream: The input image is too small.; no charge was made" });
    expect(dashScopeStatusOf(ds({ task_status: "CANCELED" }), model, "t")).toMatchObject({ reason: expect.stringMatching(/cancelled/) });
    expect(dashScopeStatusOf(ds({ task_status: "UNKNOWN" }), model, "t")).toMatchObject({ reason: expect.stringMatching(/no longer knows/) });
  });

  it("classifies on DashScope's codes: balance and keys take the channel out, throttling is retried", () => {
    expect(classifyDashScope(400, "Arrearage", "Access denied")).toBe("misconfigured");
    expect(classifyDashScope(401, "InvalidApiKey", "")).toBe("misconfigured");
    expect(classifyDashScope(400, "InvalidParameter", "Model not exist.")).toBe("notFound");
    expect(classifyDashScope(400, "InvalidParameter", "duration must be an integer")).toBe("rejected");
    expect(classifyDashScope(400, "DataInspectionFailed", "")).toBe("moderation");
    expect(classifyDashScope(429, "Throttling.RateQuota", "")).toBe("unavailable");
    expect(classifyDashScope(503, "HTTP 503", "")).toBe("unavailable");
  });
});

describe("Kling translation", () => {
  it("maps every task status; the reason of a failure is task_status_msg", () => {
    expect(klingStatusOf(kt({ task_status: "submitted" }), model)).toEqual({ state: "queued" });
    expect(klingStatusOf(kt({ task_status: "processing" }), model)).toEqual({ state: "running" });
    expect(klingStatusOf(kt({ task_status: "succeed", task_result: { videos: [{ id: "v", url: "https://kw/v.mp4", duration: "5.0" }] } }), model)).toEqual({
      state: "succeeded",
      result: { kind: "url", url: "https://kw/v.mp4" },
      durationSeconds: 5,
      upstreamUsage: { unit: "seconds", amount: 5, costMicros: 2_500_000 },
    });
    expect(klingStatusOf(kt({ task_status: "succeed", task_result: {} }), model)).toMatchObject({ state: "failed" });
    expect(klingStatusOf(kt({ task_status: "failed", task_status_msg: "Image pixel is invalid" }), model)).toMatchObject({ reason: "video generation failed upstream: Image pixel is invalid; no charge was made" });
  });

  it("tells a 429 rate limit (retried) from a 429 empty balance (channel out), on Kling's code", () => {
    expect(readKlingError(429, { code: 1303, message: "parallel task over resource pack limit" })?.kind).toBe("unavailable");
    expect(readKlingError(429, { code: 1302, message: "rate" })?.kind).toBe("unavailable");
    expect(readKlingError(429, { code: 1102, message: "resource pack depleted" })?.kind).toBe("misconfigured");
    expect(readKlingError(429, { code: 1101, message: "arrears" })?.kind).toBe("misconfigured");
    expect(readKlingError(200, { code: 0, message: "SUCCEED", data: {} })).toBeUndefined();
    expect(readKlingError(200, { code: 1201, message: "bad" })?.kind).toBe("rejected");
    expect(classifyKling(400, "1301")).toBe("moderation");
    expect(classifyKling(503, undefined)).toBe("unavailable");
  });

  it("sends duration as a string and refuses what Kling does not render; a data: image goes as raw base64", () => {
    expect(klingBody(sampleJob, model, "reelay-task-1", undefined)).toEqual({ model_name: "m", prompt: "p", mode: "std", duration: "5", external_task_id: "reelay-task-1", aspect_ratio: "16:9" });
    expect(() => klingBody({ ...sampleJob, durationSeconds: 6 }, model, "r", undefined)).toThrow(ProviderRejected);
    expect(() => klingBody({ ...sampleJob, ratio: "4:3" }, model, "r", undefined)).toThrow(/16:9, 9:16 or 1:1, not 4:3/);
    expect(klingImageOf("data:image/png;base64,AAAA")).toBe("AAAA");
    expect(klingImageOf("https://example.com/a.png")).toBe("https://example.com/a.png");
  });

  it("signs HS256 JWTs with iss, exp (30 min) and nbf (-5 s), reused until five minutes before expiry", async () => {
    let now = 1_800_000_000;
    const token = new KlingToken("ak", "sk", () => now);
    const first = await token.bearer();
    const { payload, protectedHeader } = await jwtVerify(first, new TextEncoder().encode("sk"), { currentDate: new Date(now * 1000) });
    expect(protectedHeader).toMatchObject({ alg: "HS256", typ: "JWT" });
    expect(payload).toMatchObject({ iss: "ak", exp: now + 1800, nbf: now - 5 });
    now += 1400;
    expect(await token.bearer()).toBe(first);
    now += 200;
    const second = await token.bearer();
    expect(second).not.toBe(first);
    expect(decodeJwt(second).exp).toBe(now + 1800);
    token.renew();
    expect(await token.bearer()).not.toBe(second);
  });
});

describe("MiniMax translation", () => {
  it("maps every status, in any case; Fail with 1026/1027 is the content policy", () => {
    expect(miniMaxProgressOf(mm({ status: "Preparing" }), "m")).toEqual({ state: "queued" });
    expect(miniMaxProgressOf(mm({ status: "Queueing" }), "m")).toEqual({ state: "queued" });
    expect(miniMaxProgressOf(mm({ status: "processing" }), "m")).toEqual({ state: "running" });
    expect(miniMaxProgressOf(mm({ status: "success", file_id: "f", video_width: "1366", video_height: 768 }), "m")).toEqual({ state: "finished", fileId: "f", resolution: "1366*768" });
    expect(miniMaxProgressOf(mm({ status: "Success" }), "m")).toMatchObject({ state: "failed" });
    expect(miniMaxProgressOf(mm({ status: "Fail", base_resp: { status_code: 1027, status_msg: "output sensitive" } }), "m")).toMatchObject({ reason: expect.stringMatching(/content policy/) });
    expect(miniMaxProgressOf(mm({ status: "Fail", base_resp: { status_code: 0, status_msg: "success" } }), "m")).toMatchObject({ reason: "video generation failed upstream; no charge was made" });
  });

  it("reads errors from base_resp even on HTTP 200: balance takes the channel out, rate limits are retried", () => {
    expect(readMiniMaxError(200, { base_resp: { status_code: 1008, status_msg: "insufficient balance" } })?.kind).toBe("misconfigured");
    expect(readMiniMaxError(200, { base_resp: { status_code: 1002, status_msg: "rate limit" } })?.kind).toBe("unavailable");
    expect(readMiniMaxError(200, { base_resp: { status_code: 2049, status_msg: "invalid api key" } })?.kind).toBe("misconfigured");
    expect(readMiniMaxError(200, { base_resp: { status_code: 1026, status_msg: "input sensitive" } })?.kind).toBe("moderation");
    expect(readMiniMaxError(200, { task_id: "1", base_resp: { status_code: 0, status_msg: "success" } })).toBeUndefined();
    // A query answer with a status is a task's state, read by the status mapping, not an error.
    expect(readMiniMaxError(200, { status: "Fail", base_resp: { status_code: 1027, status_msg: "x" } })).toBeUndefined();
  });

  it("renders 6 or 10 s, Hailuo at 768P; text-to-video only at 16:9", () => {
    expect(miniMaxBody({ ...sampleJob, durationSeconds: 6 }, { ...model, upstreamModel: "MiniMax-Hailuo-2.3" }, undefined)).toMatchObject({ resolution: "768P", duration: 6 });
    expect(miniMaxBody({ ...sampleJob, durationSeconds: 6 }, { ...model, upstreamModel: "T2V-01" }, undefined)).toMatchObject({ resolution: "720P" });
    expect(() => miniMaxBody(sampleJob, model, undefined)).toThrow(/6 or 10 seconds, not 5/);
    expect(() => miniMaxBody({ ...sampleJob, durationSeconds: 6, ratio: "1:1" }, model, undefined)).toThrow(/16:9 only/);
    expect(miniMaxBody({ ...sampleJob, durationSeconds: 6, ratio: "1:1", references: { image_url: "https://i/x.png" } }, model, undefined)).toMatchObject({ first_frame_image: "https://i/x.png" });
  });
});

describe("Veo translation", () => {
  it("maps an operation: running, failed (error object or string), succeeded, filtered, done without a video", () => {
    expect(veoProgressOf(op({}))).toEqual({ state: "running" });
    expect(veoProgressOf(op({ done: false }))).toEqual({ state: "running" });
    expect(veoProgressOf(op({ done: true, error: { code: 13, message: "internal" } }))).toMatchObject({ reason: "video generation failed upstream: internal; no charge was made" });
    expect(veoProgressOf(op({ done: true, error: "internal" }))).toMatchObject({ reason: "video generation failed upstream: internal; no charge was made" });
    expect(veoProgressOf(op({ done: true, response: { generateVideoResponse: { generatedSamples: [{ video: { uri: "https://g/v" } }] } } }))).toEqual({ state: "finished", uri: "https://g/v" });
    expect(veoProgressOf(op({ done: true, response: { generateVideoResponse: { raiMediaFilteredCount: 1, raiMediaFilteredReasons: ["policy"] } } }))).toMatchObject({ reason: expect.stringMatching(/content policy/) });
    expect(veoProgressOf(op({ done: true, response: {} }))).toMatchObject({ reason: expect.stringMatching(/without a video/) });
  });

  it("classifies Google's errors: an invalid key is a 400 that takes the channel out", () => {
    expect(readGoogleError(400, { error: { code: 400, message: "API key not valid.", status: "INVALID_ARGUMENT", details: [{ reason: "API_KEY_INVALID" }] } })?.kind).toBe("misconfigured");
    expect(readGoogleError(400, { error: { code: 400, message: "bad", status: "INVALID_ARGUMENT" } })?.kind).toBe("rejected");
    expect(classifyGoogle(429, "RESOURCE_EXHAUSTED", [])).toBe("unavailable");
    expect(classifyGoogle(400, "FAILED_PRECONDITION", [])).toBe("misconfigured");
    expect(classifyGoogle(404, "NOT_FOUND", [])).toBe("notFound");
  });

  it("renders 4, 6 or 8 s at 16:9 or 9:16, 720p, one sample", () => {
    expect(veoBody({ ...sampleJob, durationSeconds: 8 }, undefined)).toEqual({ instances: [{ prompt: "p" }], parameters: { aspectRatio: "16:9", durationSeconds: 8, resolution: "720p", sampleCount: 1 } });
    expect(() => veoBody(sampleJob, undefined)).toThrow(/4, 6 or 8 seconds, not 5/);
    expect(() => veoBody({ ...sampleJob, durationSeconds: 8, ratio: "1:1" }, undefined)).toThrow(/16:9 or 9:16, not 1:1/);
  });
});

describe("statuses no vendor documents", () => {
  const known = new Set(["pending", "running", "suspended", "succeeded", "failed", "canceled", "cancelled", "unknown", "submitted", "processing", "succeed", "preparing", "queueing", "queued", "success", "fail"]);
  it("never end a task, whatever the vendor", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 20 }).filter((status) => !known.has(status.trim().toLowerCase())),
        (status) => {
          expect(dashScopeStatusOf(ds({ task_status: status, video_url: "u" }), model, "t").state).toBe("unknown");
          expect(klingStatusOf(kt({ task_status: status }), model).state).toBe("unknown");
          expect(miniMaxProgressOf(mm({ status, file_id: "f" }), "m").state).toBe("unknown");
        },
      ),
    );
  });
});
