import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anyCodePoint } from "./helpers/anyCodePoint.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { expectReadyAgain } from "./helpers/readiness.ts";

/**
 * Bad input on the chat endpoints never crashes the edge or leaks internals: every refusal is OpenAI's
 * `{error:{message,type,param,code}}` with a matching status, and good input still works afterwards.
 */
const STACK_OR_CLASS = [/^\s*at\s/m, /\(\S+:\d+:\d+\)/, /\b[A-Za-z]*Error:/, /node_modules|\/work\/|\.ts:\d+/];

describe("chat endpoints under arbitrary input", () => {
  let app: TestApp;
  let key: string;
  beforeAll(async () => {
    app = await startTestApp({ services: ["edge", "projector"] });
    key = await app.keyFor("chat-fuzz");
  });
  afterAll(async () => app?.stop());

  async function post(body: string): Promise<{ status: number; text: string }> {
    const response = await fetch(`${app.baseUrl}/api/compat/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body,
    });
    return { status: response.status, text: await response.text() };
  }

  /** Resolves to the refusal's message ("" for a 200). */
  async function check(body: string): Promise<string> {
    const answer = await post(body);
    if (answer.status === 200) return ""; // a valid echo request (streaming or not)
    expect([400, 404, 413]).toContain(answer.status);
    const parsed = JSON.parse(answer.text) as { error?: { message?: unknown; type?: unknown } };
    expect(typeof parsed.error?.message).toBe("string");
    expect(typeof parsed.error?.type).toBe("string");
    for (const leak of STACK_OR_CLASS) expect(String(parsed.error?.message)).not.toMatch(leak);
    return String(parsed.error?.message);
  }

  it("any JSON value as the body gets 200 or a clear OpenAI-shaped 4xx", async () => {
    await fc.assert(fc.asyncProperty(fc.jsonValue(), async (value) => void (await check(JSON.stringify(value)))), { numRuns: 150 });
  });

  it("bodies near a valid request (wrong types, missing or extra fields) get 200 or a 400 naming the field", async () => {
    const message = fc.record({ role: fc.constantFrom("user", "system", "assistant", 7), content: fc.oneof(fc.string(), fc.integer(), fc.constant(null)) }, { requiredKeys: [] });
    const body = fc.record(
      {
        model: fc.oneof(fc.constant("echo"), fc.string(), fc.integer(), fc.constant(null)),
        messages: fc.oneof(fc.array(message, { maxLength: 3 }), fc.string(), fc.constant(null)),
        stream: fc.oneof(fc.boolean(), fc.string(), fc.constant(null)),
        stream_options: fc.oneof(fc.record({ include_usage: fc.oneof(fc.boolean(), fc.string()) }), fc.string()),
        temperature: fc.double(),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(body, async (value) => {
        const refusal = await check(JSON.stringify(value));
        if (refusal !== "") expect(refusal).toMatch(/model|messages|stream/);
      }),
      { numRuns: 200 },
    );
  });

  it("arbitrary text is refused as a body that is not JSON, and the edge keeps working", async () => {
    await fc.assert(fc.asyncProperty(fc.string({ unit: anyCodePoint }), async (text) => void (await check(text))), { numRuns: 100 });
    const ok = await post(JSON.stringify({ model: "echo", messages: [{ role: "user", content: "still here" }] }));
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toMatchObject({ choices: [{ message: { content: "still here" } }] });
    await expectReadyAgain(app.baseUrl);
  });
});
