import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ArkTask, classifyError, createBody, withoutRequestId } from "../services/runner/providers/ark/arkApi.ts";
import { arkStatusOf } from "../services/runner/providers/ark/arkStatus.ts";
import { sampleJob } from "./helpers/fixtures.ts";

/** The pure half of the Ark adapter: our job as Ark's body, Ark's answers and errors in our words. */
describe("Ark translation", () => {
  const task = (fields: Record<string, unknown>) => ArkTask.parse({ id: "cgt-20260820101500-abcde", ...fields });

  it("sends references only where the model's capabilities include them, the image with the model's role", () => {
    const job = { ...sampleJob, references: { image_url: "https://a/i.png", video_url: "https://a/v.mp4", audio_url: "https://a/s.mp3" } };
    const all = createBody(job, { upstreamModel: "m", imageRole: "reference_image", capabilities: ["image", "video", "audio"] }, "reelay-task-1", undefined);
    expect(all.content.map((item) => [item.type, "role" in item ? item.role : undefined])).toEqual([
      ["text", undefined],
      ["image_url", "reference_image"],
      ["video_url", "reference_video"],
      ["audio_url", "reference_audio"],
    ]);
    const imageOnly = createBody(job, { upstreamModel: "m", imageRole: "first_frame", capabilities: ["image"] }, "reelay-task-1", "https://r/hooks/upstream/x");
    expect(imageOnly.content).toHaveLength(2);
    expect(imageOnly).toMatchObject({ resolution: "720p", watermark: false, generate_audio: true, safety_identifier: "reelay-task-1", callback_url: "https://r/hooks/upstream/x" });
  });

  it("maps every Ark status; customers read no vendor codes, request ids or task ids", () => {
    expect(arkStatusOf(task({ status: "queued" }), undefined)).toEqual({ state: "queued" });
    expect(arkStatusOf(task({ status: " Running " }), undefined)).toEqual({ state: "running" });
    const done = arkStatusOf(task({ status: "succeeded", content: { video_url: "https://tos/x.mp4" }, usage: { completion_tokens: "108900" }, resolution: "720p", ratio: "9:16", duration: 5 }), undefined);
    expect(done).toMatchObject({ state: "succeeded", usageTokens: 108_900, resolution: "720*1280", durationSeconds: 5 });
    // A count past any video's is the vendor's bug: no count (the estimate is charged), not money the ledger cannot hold.
    const absurd = arkStatusOf(task({ status: "succeeded", content: { video_url: "https://tos/x.mp4" }, usage: { completion_tokens: 9e15 }, resolution: "720p", ratio: "9:16", duration: 5 }), undefined);
    expect(absurd.state).toBe("succeeded");
    expect(absurd).not.toHaveProperty("usageTokens");
    const blocked = arkStatusOf(task({ status: "failed", error: { code: "OutputVideoSensitiveContentDetected", message: "may contain sensitive information. Request id: 0217abc" } }), undefined);
    expect(blocked).toMatchObject({ state: "failed", reason: expect.stringMatching(/content policy/) });
    for (const status of ["failed", "expired", "cancelled"]) {
      const failed = arkStatusOf(task({ status, error: { code: "InternalServiceError", message: "boom Request id: 0217abc" } }), undefined);
      expect(failed.state).toBe("failed");
      if (failed.state === "failed") expect(failed.reason).not.toMatch(/Request id|cgt-|InternalServiceError/);
    }
    expect(arkStatusOf(task({ status: "succeeded", content: {} }), undefined).state).toBe("failed");
  });

  it("an unknown status never ends a task", () => {
    const known = new Set(["queued", "pending", "running", "processing", "succeeded", "failed", "expired", "cancelled", "canceled"]);
    fc.assert(
      fc.property(fc.string(), (status) => {
        fc.pre(!known.has(status.trim().toLowerCase()));
        expect(arkStatusOf(task({ status }), undefined).state).toBe("unknown");
      }),
    );
  });

  it("classifies errors by Ark's code first: a quota 429 is not retried, a rate-limit 429 is", () => {
    expect(classifyError(429, "QuotaExceeded")).toBe("misconfigured");
    expect(classifyError(429, "RateLimitExceeded.EndpointRPMExceeded")).toBe("unavailable");
    expect(classifyError(403, "AccountOverdueError")).toBe("misconfigured");
    expect(classifyError(400, "InputImageSensitiveContentDetected.PolicyViolation")).toBe("moderation");
    expect(classifyError(400, "InvalidParameter")).toBe("rejected");
    expect(classifyError(404, "NotFound.TaskId")).toBe("notFound");
    expect(classifyError(503, undefined)).toBe("unavailable");
    fc.assert(
      fc.property(fc.integer({ min: 100, max: 599 }), fc.option(fc.string()), (status, code) => {
        expect(["rejected", "moderation", "misconfigured", "unavailable", "notFound"]).toContain(classifyError(status, code));
      }),
    );
    expect(withoutRequestId("the input text may contain sensitive information. Request id: 0217512345")).toBe("the input text may contain sensitive information.");
  });
});
