import { request as httpRequest, type IncomingMessage } from "node:http";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ChatUsageCharge, ChatUsageMeter } from "../services/billing/chatUsageMeter.ts";
import { startFakeUpstream, type FakeUpstream } from "./fakes/openaiUpstream.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/** The chat surface as customers use it: the official Node client pointed at {base}/api/compat. */
describe("chat completions end to end (official openai client)", () => {
  let app: TestApp;
  let fake: FakeUpstream;
  let key: string;
  let client: OpenAI;
  const charges: ChatUsageCharge[] = [];
  const meter: ChatUsageMeter = { reserve: async () => {}, charge: async (charge) => void charges.push(charge) };

  beforeAll(async () => {
    fake = await startFakeUpstream();
    process.env.REELAY_TEST_UPSTREAM_KEY = fake.apiKey;
    app = await startTestApp({
      services: ["edge"],
      chatUsageMeter: meter,
      tweak: (config) => {
        const upstream = { provider: "openai-compatible", baseUrl: fake.baseUrl, apiKeyEnv: "REELAY_TEST_UPSTREAM_KEY", inputPricePerMillionTokens: 2, outputPricePerMillionTokens: 8, maxCompletionTokens: 4096 } as const;
        config.chatModels["fake-gpt"] = { ...upstream, upstreamModel: "fake-upstream-model", timeoutMs: 1500 };
        config.chatModels["no-key-gpt"] = { ...upstream, apiKeyEnv: "REELAY_TEST_UNSET_KEY", upstreamModel: "x", timeoutMs: 1500 };
      },
    });
    key = await app.keyFor("alice");
    client = new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: key, maxRetries: 0 });
  });
  afterAll(async () => {
    await app?.stop();
    await fake?.stop();
  });
  beforeEach(() => {
    fake.behave({});
    fake.requests.length = 0;
    charges.length = 0;
  });

  describe("the built-in echo model", () => {
    it("answers a single turn with the user's message, real usage and a request id", async () => {
      const { data, response } = await client.chat.completions
        .create({ model: "echo", messages: [{ role: "user", content: "hello there, reelay" }] })
        .withResponse();
      expect(response.headers.get("content-type")).toBe("application/json");
      expect(response.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
      expect(data.object).toBe("chat.completion");
      expect(data.choices[0]?.message).toMatchObject({ role: "assistant", content: "hello there, reelay" });
      expect(data.choices[0]?.finish_reason).toBe("stop");
      expect(data.usage).toEqual({ prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
      expect(charges).toEqual([expect.objectContaining({ account: "alice", model: "echo", promptTokens: 3, completionTokens: 3, requestId: response.headers.get("x-request-id") })]);
    });

    it("answers the last user message of a multi-turn conversation, counting every turn", async () => {
      const reply = await client.chat.completions.create({
        model: "echo",
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: "first question" },
          { role: "assistant", content: "first answer" },
          { role: "user", content: [{ type: "text", text: "second question please" }] },
        ],
      });
      expect(reply.choices[0]?.message.content).toBe("second question please");
      expect(reply.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 3 });
    });

    it("streams word by word: role first, finish_reason stop, usage chunk only when asked", async () => {
      const message = "one two  three\tfour";
      const plain = await client.chat.completions.create({ model: "echo", stream: true, messages: [{ role: "user", content: message }] });
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      for await (const chunk of plain) chunks.push(chunk);
      expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
      expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0]?.id)).toBe(true);
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(message);
      expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBe(4);
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
      expect(chunks.some((c) => c.usage)).toBe(false);

      const withUsage = await client.chat.completions.create({
        model: "echo",
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: message }],
      });
      const last = [];
      for await (const chunk of withUsage) last.push(chunk);
      expect(last.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 4, total_tokens: 8 } });
    });
  });

  describe("an OpenAI-compatible upstream", () => {
    it("relays a multi-turn request untouched except the model, and the upstream's answer", async () => {
      const body = {
        model: "fake-gpt",
        messages: [
          { role: "system" as const, content: "sys" },
          { role: "user" as const, content: "hi" },
          { role: "assistant" as const, content: "hello" },
          { role: "user" as const, content: "how are you" },
        ],
        temperature: 0.25,
        response_format: { type: "text" as const },
        user: "end-user-7",
      };
      const reply = await client.chat.completions.create(body);
      expect(reply.choices[0]?.message.content).toBe("You said: how are you");
      // Untouched but for the model and, with no bound of the client's, the model's bound on the answer (what was reserved).
      expect(fake.requests[0]?.body).toEqual({ ...body, model: "fake-upstream-model", max_completion_tokens: 4096 });
      expect(fake.requests[0]?.headers.authorization).toBe(`Bearer ${fake.apiKey}`);
      expect(charges).toEqual([expect.objectContaining({ model: "fake-gpt", promptTokens: 7, completionTokens: 5, inputPricePerMillionTokens: 2, outputPricePerMillionTokens: 8 })]);
    });

    it("streams, asking the upstream for usage but hiding the usage chunk from a client that did not ask", async () => {
      const stream = await client.chat.completions.create({ model: "fake-gpt", stream: true, messages: [{ role: "user", content: "stream me please" }] });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("You said: stream me please");
      expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
      expect(fake.requests[0]?.body.stream_options).toEqual({ include_usage: true });
      expect(charges).toEqual([expect.objectContaining({ promptTokens: 7, completionTokens: 5 })]);

      const asked = await client.chat.completions.create({ model: "fake-gpt", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "x" }] });
      const seen = [];
      for await (const chunk of asked) seen.push(chunk);
      expect(seen.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 3 } });
    });

    it("passes tool definitions up and tool calls down, streaming or not", async () => {
      const toolCalls = [{ id: "call_1", type: "function" as const, function: { name: "get_weather", arguments: '{"city":"Paris"}' } }];
      fake.behave({ toolCalls });
      const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
      const messages = [
        { role: "user" as const, content: "weather?" },
        { role: "assistant" as const, content: null, tool_calls: toolCalls },
        { role: "tool" as const, tool_call_id: "call_1", content: "sunny" },
        { role: "user" as const, content: "and again?" },
      ];
      const reply = await client.chat.completions.create({ model: "fake-gpt", messages, tools, tool_choice: "auto" });
      expect(reply.choices[0]?.message.tool_calls).toEqual(toolCalls);
      expect(reply.choices[0]?.finish_reason).toBe("tool_calls");
      expect(fake.requests[0]?.body).toMatchObject({ messages, tools, tool_choice: "auto" });

      const stream = await client.chat.completions.create({ model: "fake-gpt", messages, tools, stream: true });
      const deltas = [];
      for await (const chunk of stream) deltas.push(...(chunk.choices[0]?.delta.tool_calls ?? []));
      expect(deltas).toEqual([{ index: 0, ...toolCalls[0] }]);
    });
  });

  describe("errors, as the client library's exception classes", () => {
    it("answers a wrong method (405 with Allow) or path (OpenAI's unknown URL) under the chat API in OpenAI's error shape", async () => {
      for (const [method, path] of [["GET", "/api/compat/chat/completions"], ["PUT", "/api/compat/chatCompletions"]]) {
        const response = await fetch(`${app.baseUrl}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
        expect(response.status).toBe(405);
        expect(response.headers.get("allow")).toBe("POST");
        expect(await response.json()).toEqual({ error: { message: `${method} is not allowed on ${path} (allowed: POST)`, type: "invalid_request_error", param: null, code: null } });
      }
      const unknown = await fetch(`${app.baseUrl}/api/compat/chat/complete`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
      expect(unknown.status).toBe(404);
      expect(await unknown.json()).toMatchObject({ error: { message: expect.stringMatching(/^Unknown request URL: POST \/api\/compat\/chat\/complete\. Please check the URL for typos/), type: "invalid_request_error", param: null, code: "unknown_url" } });
      const stillWorks = await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "ok" }] });
      expect(stillWorks.choices[0]?.message.content).toBe("ok");
    });

    it("rejects a bad key with AuthenticationError on chat and models", async () => {
      const stranger = new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: "rly_wrong", maxRetries: 0 });
      await expect(stranger.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "x" }] })).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
      await expect(stranger.models.list()).rejects.toMatchObject({ status: 401, code: "invalid_api_key" });
    });

    it("answers an unknown model with NotFoundError naming the model", async () => {
      const error = await client.chat.completions.create({ model: "gpt-9", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error).toMatchObject({ param: "model", code: "model_not_found" });
    });

    it("answers a bad body with BadRequestError naming the field", async () => {
      const error = await client.chat.completions.create({ model: "echo", messages: [] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ param: "messages", type: "invalid_request_error" });
      for (const [body, param] of [["{not json", null], ["[1]", null], ['{"messages":[{"role":"user"}]}', "model"], ['{"model":"echo","messages":"hi"}', "messages"]] as const) {
        const response = await fetch(`${app.baseUrl}/api/compat/chatCompletions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
        expect(response.status).toBe(400);
        expect(((await response.json()) as { error: { param: string | null } }).error.param).toBe(param);
      }
    });

    it("answers 413 for a body over the limit", async () => {
      const response = await fetch(`${app.baseUrl}/api/compat/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "x".repeat(app.config.limits.maxBodyBytes) }] }),
      });
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject({ error: { code: "request_too_large" } });
    });

    it("turns an upstream 500 into InternalServerError (502) without hanging, and passes a 429 on", async () => {
      fake.behave({ status: 500 });
      const error = await client.chat.completions.create({ model: "fake-gpt", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.InternalServerError);
      expect(error).toMatchObject({ status: 502 });
      fake.behave({ status: 429 });
      await expect(client.chat.completions.create({ model: "fake-gpt", messages: [{ role: "user", content: "x" }] })).rejects.toBeInstanceOf(OpenAI.RateLimitError);
      await expect(client.chat.completions.create({ model: "no-key-gpt", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 502 });
    });

    it("answers 504 when the upstream does not answer in time, and hangs up on it", async () => {
      fake.behave({ hang: true });
      const abortsBefore = fake.stats.aborted;
      const started = Date.now();
      await expect(client.chat.completions.create({ model: "fake-gpt", stream: true, messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 504 });
      expect(Date.now() - started).toBeLessThan(5000);
      await fake.waitForAborts(abortsBefore + 1);
    });

    it("ends a stream that breaks off upstream with an error the client raises", async () => {
      fake.behave({ content: "a b c d e f g", failAfterChunks: 3 });
      const stream = await client.chat.completions.create({ model: "fake-gpt", stream: true, messages: [{ role: "user", content: "x" }] });
      const received: string[] = [];
      const failure = await (async () => {
        for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? "");
      })().catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(OpenAI.APIError);
      expect(String((failure as Error).message)).toMatch(/broke off/);
      expect(received.join("")).toBe("a b c ");
      // What reached the client is billed, counted by reelay: the upstream sent no usage.
      await expect.poll(() => charges).toEqual([expect.objectContaining({ counted: true, completionTokens: 4 })]);
    });
  });

  describe("streaming mechanics", () => {
    it("aborts the upstream request when the client disconnects", async () => {
      fake.behave({ content: "word ".repeat(200), chunkDelayMs: 20 });
      const abortsBefore = fake.stats.aborted;
      const stream = await client.chat.completions.create({ model: "fake-gpt", stream: true, messages: [{ role: "user", content: "x" }] });
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) break; // leaving the loop aborts the HTTP request
      }
      await fake.waitForAborts(abortsBefore + 1);
      expect(fake.stats.aborted).toBe(abortsBefore + 1);
    });

    it("stops reading the upstream while the client does not read, and resumes without loss", async () => {
      const total = 50 * 1024 * 1024;
      fake.behave({ floodBytes: total, floodChunkBytes: 16_384 });
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = httpRequest(`${app.baseUrl}/api/compat/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } }, resolve);
        req.once("error", reject);
        req.end(JSON.stringify({ model: "fake-gpt", stream: true, messages: [{ role: "user", content: "flood" }] }));
      });
      expect(response.headers["content-type"]).toBe("text/event-stream");
      response.pause();
      // The fake blocks on drain once every buffer between it and us is full; the edge must not absorb the rest.
      let sentWhenStalled = -1;
      for (let tries = 0; tries < 100 && sentWhenStalled < 0; tries++) {
        const before = fake.stats.floodBytesSent;
        await new Promise((r) => setTimeout(r, 100));
        if (fake.stats.waitingForDrain && fake.stats.floodBytesSent === before) sentWhenStalled = before;
      }
      expect(sentWhenStalled).toBeGreaterThan(0);
      expect(sentWhenStalled).toBeLessThan(total / 2);
      let received = 0;
      response.on("data", (chunk: Buffer) => (received += chunk.length));
      response.resume();
      await new Promise((resolve) => response.once("end", resolve));
      expect(fake.stats.floodBytesSent).toBe(total);
      expect(received).toBeGreaterThan(total);
    });

    it("serves the spec's path with the same behaviour", async () => {
      const response = await fetch(`${app.baseUrl}/api/compat/chatCompletions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "echo", stream: true, messages: [{ role: "user", content: "spec path" }] }),
      });
      expect(response.headers.get("content-type")).toBe("text/event-stream");
      expect(response.headers.get("x-request-id")).toMatch(/^req_/);
      const text = await response.text();
      expect(text.startsWith('data: {"id":"chatcmpl-')).toBe(true);
      expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    });
  });

  it("lists chat and video models in OpenAI's list shape", async () => {
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(expect.arrayContaining(["echo", "fake-gpt", "VideoModel-2.0", "VideoModel-2.0-fast", "VideoModel-2.0-mini"]));
    expect(await client.models.retrieve("echo")).toMatchObject({ id: "echo", object: "model", owned_by: "reelay" });
    // An unknown id is named in 100 characters at most (the path may hold 8 KB of it).
    const unknown = await client.models.retrieve("m".repeat(4_000)).catch((error: unknown) => error);
    expect(unknown).toMatchObject({ status: 404, code: "model_not_found", message: expect.stringContaining(`The model \`${"m".repeat(100)}\` does not exist.`) });
    expect(String((unknown as Error).message).length).toBeLessThan(200);
  });
});
