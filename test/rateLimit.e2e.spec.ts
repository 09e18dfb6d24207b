import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RateLimiter } from "../services/edge/rateLimiter.ts";
import { RateLimitedError } from "../services/shared/errors.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

describe("rate limiter (token bucket per key)", () => {
  it("allows a burst, then the average rate, and refills with time", () => {
    let now = 0;
    const limiter = new RateLimiter(2, 3, () => now);
    for (let i = 0; i < 3; i++) limiter.take("k");
    expect(() => limiter.take("k")).toThrow(RateLimitedError);
    limiter.take("other");
    now = 500; // half a second refills one token at 2/s
    limiter.take("k");
    expect(() => limiter.take("k")).toThrow(/at most 2 requests per second/);
  });

  it("is off at 0 requests per second", () => {
    const limiter = new RateLimiter(0, 1, () => 0);
    for (let i = 0; i < 1000; i++) limiter.take("k");
  });
});

describe("a key over its rate", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({
      services: ["edge", "projector"],
      tweak: (config) => {
        config.limits.requestsPerSecondPerKey = 0.5;
        config.limits.burstPerKey = 2;
      },
    });
  });
  afterAll(async () => app?.stop());

  it("gets 429 in the video envelope, while other keys are not affected", async () => {
    const busy = new VideoClient(app.baseUrl, await app.keyFor("busy"));
    expect((await busy.query(1)).status).toBe(404);
    expect((await busy.query(1)).status).toBe(404);
    expect(await busy.query(1)).toEqual({ status: 429, body: { code: 429, msg: expect.stringMatching(/^rate limit exceeded/) } });
    const calm = new VideoClient(app.baseUrl, await app.keyFor("calm"));
    expect((await calm.query(1)).status).toBe(404);
  });

  it("gets OpenAI's RateLimitError on chat", async () => {
    const client = new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: await app.keyFor("chatty"), maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "hi" }] });
    await ask();
    await ask();
    await expect(ask()).rejects.toBeInstanceOf(OpenAI.RateLimitError);
  });
});
