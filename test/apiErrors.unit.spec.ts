import pino from "pino";
import { describe, expect, it } from "vitest";
import { ReelayConfig } from "../contracts/config.ts";
import { openAiError } from "../services/edge/http/openAiErrors.ts";
import { videoError } from "../services/edge/http/videoErrors.ts";
import { normalizeVideoRequest } from "../services/edge/video/normalizeRequest.ts";
import { InsufficientBalanceError } from "../services/billing/account.ts";
import { InvalidApiKeyError, MethodNotAllowedError, MissingApiKeyError, NotFoundError, ServiceUnavailableError, ValidationError } from "../services/shared/errors.ts";

const log = pino({ level: "silent" });
const config = ReelayConfig.parse({
  providers: { local: { kind: "local" } },
  videoModels: { "VideoModel-2.0-mini": { provider: "local", capabilities: [], pricePerMillionTokens: 23 } },
});

/** What a thrown error becomes on each wire: the spec's envelope and OpenAI's `{error:{…}}`. */
const bothWires = (error: unknown) => ({ spec: videoError(error, log), openAi: openAiError(error, log) });
const thrownBy = (run: () => unknown): unknown => {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("nothing was thrown");
};

/**
 * One error type, one mapping per API family: an error carries its status and, where OpenAI answers the
 * same condition otherwise, OpenAI's status, words, type, code and param; no mapping reads a message's text.
 */
describe("one error, two wires", () => {
  it("an exhausted balance: 403 in the envelope; OpenAI's 429 insufficient_quota, which its SDKs do not retry", () => {
    const { spec, openAi } = bothWires(new InsufficientBalanceError("insufficient balance: this task needs 1.000000 yuan, available 0.000000"));
    expect(spec).toEqual({ status: 403, body: { code: 403, msg: "insufficient balance: this task needs 1.000000 yuan, available 0.000000" } });
    expect(openAi.status).toBe(429);
    expect(openAi.headers).toEqual({ "x-should-retry": "false" });
    expect(openAi.body.error).toEqual({
      message:
        "You exceeded your current quota, please check your plan and billing details. reelay: insufficient balance: this task needs 1.000000 yuan, available 0.000000; ask your reelay operator to credit the account.",
      type: "insufficient_quota",
      param: null,
      code: "insufficient_quota",
    });
  });

  it("an unknown video model: the spec's 403 'model not supported'; OpenAI's 404 model_not_found naming the parameter", () => {
    const { spec, openAi } = bothWires(thrownBy(() => normalizeVideoRequest({ model: "Sora-9", prompt: "p" }, config)));
    expect(spec.body).toEqual({ code: 403, msg: "model not supported: Sora-9" });
    expect(openAi.status).toBe(404);
    expect(openAi.body.error).toEqual({ message: "The model `Sora-9` does not exist or is not a video model.", type: "invalid_request_error", param: "model", code: "model_not_found" });
  });

  it("a duration out of the model's bounds is named as each API names the field: duration, or seconds", () => {
    const { spec, openAi } = bothWires(thrownBy(() => normalizeVideoRequest({ model: "VideoModel-2.0-mini", prompt: "p", duration: 99 }, config)));
    expect(spec.body.msg).toMatch(/^duration must be between \d+ and \d+ seconds for VideoModel-2.0-mini$/);
    expect(openAi.body.error.message).toBe(spec.body.msg.replace(/^duration/, "seconds"));
    expect(openAi.body.error.param).toBe("seconds");
  });

  it("keys: a missing one has no code on OpenAI's wire, a wrong one OpenAI's own words and invalid_api_key", () => {
    expect(bothWires(new MissingApiKeyError()).spec.body.msg).toBe("missing API key: send Authorization: Bearer <API_KEY>");
    expect(bothWires(new MissingApiKeyError()).openAi.body.error).toMatchObject({ message: expect.stringMatching(/^You didn't provide an API key/), code: null });
    const wrong = bothWires(new InvalidApiKeyError("rly***abcd"));
    expect(wrong.spec.body).toEqual({ code: 401, msg: "invalid API key" });
    expect(wrong.openAi.body.error).toMatchObject({ message: expect.stringMatching(/^Incorrect API key provided: rly\*\*\*abcd\./), type: "invalid_request_error", code: "invalid_api_key" });
  });

  it("the status's defaults and headers apply on both wires; anything unknown is a 500 that says nothing of itself", () => {
    expect(bothWires(new ValidationError("order must be asc or desc", { param: "order" })).openAi.body.error).toEqual({ message: "order must be asc or desc", type: "invalid_request_error", param: "order", code: null });
    expect(bothWires(new NotFoundError("gone", { code: "video_not_found" })).openAi.body.error.code).toBe("video_not_found");
    const busy = bothWires(new ServiceUnavailableError("try again", 7));
    expect([busy.spec.headers, busy.openAi.headers]).toEqual([{ "retry-after": "7" }, { "retry-after": "7" }]);
    expect(bothWires(new MethodNotAllowedError("no", ["GET", "HEAD"])).openAi.headers).toEqual({ allow: "GET, HEAD" });
    const unknown = bothWires(new TypeError("secret internals"));
    expect(unknown.spec.body).toEqual({ code: 500, msg: "internal error" });
    expect(unknown.openAi.body.error).toEqual({ message: "internal error", type: "server_error", param: null, code: null });
  });
});
