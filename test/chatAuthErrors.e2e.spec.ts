import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * How LiteLLM (litellm_core_utils/exception_mapping_utils.py, OpenAI branch) classifies an OpenAI-style
 * error: by its text first — any error mentioning "invalid_request_error" is a BadRequestError unless it
 * says "Incorrect API key provided" — and only then by status. A 401 in OpenAI's shape with any other
 * message is therefore a BadRequestError there, not an AuthenticationError.
 */
function litellmClass(status: number, body: string): string {
  if (body.includes("invalid_request_error") && !body.includes("Incorrect API key provided")) return "BadRequestError";
  return status === 401 ? "AuthenticationError" : `status ${status}`;
}

describe("a bad API key, as OpenAI client libraries see it", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ services: ["edge"] });
  });
  afterAll(async () => {
    await app?.stop();
  });

  const post = (path: string, authorization: string | undefined, body: unknown) =>
    fetch(`${app.baseUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
      body: JSON.stringify(body),
    });
  const echo = { model: "echo", messages: [{ role: "user", content: "hi" }] };
  const wrongKey = "rly_wrong-key-1234abcd";

  it("answers exactly as OpenAI does: 401, 'Incorrect API key provided: <redacted>', invalid_request_error, invalid_api_key", async () => {
    for (const path of ["/api/compat/chat/completions", "/api/compat/chatCompletions"]) {
      const response = await post(path, `Bearer ${wrongKey}`, echo);
      expect(response.status).toBe(401);
      const text = await response.text();
      expect(JSON.parse(text)).toEqual({
        error: {
          message: expect.stringMatching(/^Incorrect API key provided: rly\*{15}abcd\. You can find your API key at /),
          type: "invalid_request_error",
          param: null,
          code: "invalid_api_key",
        },
      });
      expect(text).not.toContain(wrongKey);
      expect(litellmClass(response.status, text)).toBe("AuthenticationError");
    }
  });

  it("is raised as AuthenticationError by the openai SDK, on chat and on the model list", async () => {
    const stranger = new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: wrongKey, maxRetries: 0 });
    const error = await stranger.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "x" }], stream: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error).toMatchObject({ status: 401, code: "invalid_api_key", message: expect.stringContaining("Incorrect API key provided") });
    await expect(stranger.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it("answers a missing key with OpenAI's words for it", async () => {
    const response = await post("/api/compat/chat/completions", undefined, echo);
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({
      error: { message: expect.stringMatching(/^You didn't provide an API key\./), type: "invalid_request_error", param: null, code: null },
    });
  });

  it("tells an admin token sent here where it belongs, still in OpenAI's words (an AuthenticationError to LiteLLM)", async () => {
    const adminToken = "rla_some-admin-token-5678wxyz";
    const chat = await post("/api/compat/chat/completions", `Bearer ${adminToken}`, echo);
    expect(chat.status).toBe(401);
    const text = await chat.text();
    expect((JSON.parse(text) as { error: { message: string } }).error.message).toMatch(
      /^Incorrect API key provided: rla\*{22}wxyz\. .* This is an admin token \(rla_…\): it opens the admin API and console on their own port, not this API, which takes an API key \(rly_…\)\.$/,
    );
    expect(text).not.toContain(adminToken);
    expect(litellmClass(chat.status, text)).toBe("AuthenticationError");
    const video = await post("/api/compat/videosGenerations", `Bearer ${adminToken}`, { model: "VideoModel-2.0", prompt: "p" });
    expect(await video.json()).toEqual({ code: 401, msg: expect.stringMatching(/^invalid API key: This is an admin token \(rla_…\)/) });
  });

  it("keeps the video envelope on video paths", async () => {
    const response = await post("/api/compat/videosGenerations", `Bearer ${wrongKey}`, { model: "VideoModel-2.0", prompt: "p" });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ code: 401, msg: "invalid API key" });
  });
});
