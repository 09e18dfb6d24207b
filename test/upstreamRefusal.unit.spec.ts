import { describe, expect, it } from "vitest";
import { refusalOf, type RefusalKind } from "../services/runner/providers/openai/upstreamRefusal.ts";

const openAi = (message: string, type: string, code: string | null) => JSON.stringify({ error: { message, type, param: null, code } });

/** An OpenAI-compatible upstream's error answer, read as what it was (docs/vendors.md, "OpenAI-compatible video upstreams"). */
describe("upstream refusals of an OpenAI-compatible video upstream", () => {
  it.each<[string, number, string, RefusalKind]>([
    ["OpenAI's exhausted quota (and reelay's since issue 33)", 429, openAi("You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "insufficient_quota"), "no balance"],
    ["an older reelay's empty balance", 403, openAi("insufficient balance: this task needs 2.007900 yuan, available 0.000000", "insufficient_quota", "insufficient_quota"), "no balance"],
    ["Payment Required", 402, "", "no balance"],
    ["a rate limit", 429, openAi("Rate limit reached for requests", "requests", "rate_limit_exceeded"), "rate limited"],
    ["a wrong key", 401, openAi("Incorrect API key provided: sk-***.", "invalid_request_error", "invalid_api_key"), "bad key"],
    ["a model the key may not use", 403, openAi("model not available: VideoModel-2.0", "invalid_request_error", "model_not_available"), "forbidden"],
    ["an unknown video", 404, openAi("Video with id 'video_1' not found.", "invalid_request_error", null), "not found"],
    ["LiteLLM's proxy asked to DELETE a video (FastAPI)", 405, JSON.stringify({ detail: "Method Not Allowed" }), "unsupported operation"],
    ["a bad value", 400, openAi("Invalid value: '5'.", "invalid_request_error", "invalid_value"), "invalid request"],
    ["an error page", 502, "<html>Bad Gateway</html>", "upstream error"],
  ])("%s is %s", (_label, status, body, kind) => {
    expect(refusalOf(status, body).kind).toBe(kind);
  });

  it("keeps the upstream's message and code, and the status when there is no message", () => {
    expect(refusalOf(429, openAi("You exceeded your current quota.", "insufficient_quota", "insufficient_quota"))).toEqual({ kind: "no balance", status: 429, message: "You exceeded your current quota.", code: "insufficient_quota" });
    expect(refusalOf(405, "")).toEqual({ kind: "unsupported operation", status: 405, message: "HTTP 405", code: undefined });
  });
});
