import fc from "fast-check";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAT_ROLES } from "../contracts/chatMessages.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/** Chat bodies are checked as OpenAI checks them; the openai SDK raises BadRequestError naming the field. */
describe("chat request validation (roles, content parts, n)", () => {
  let app: TestApp;
  let client: OpenAI;
  let key: string;
  beforeAll(async () => {
    app = await startTestApp({ services: ["edge"] });
    key = await app.keyFor("validator");
    client = new OpenAI({ baseURL: `${app.baseUrl}/api/compat`, apiKey: key, maxRetries: 0 });
  });
  afterAll(async () => app?.stop());

  const post = async (body: unknown) => {
    const response = await fetch(`${app.baseUrl}/api/compat/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as { error?: { param: string | null; message: string } } };
  };

  it("accepts every OpenAI role and content shape: system, developer, user parts, assistant tool calls with null content, tool", async () => {
    const reply = await client.chat.completions.create({
      model: "echo",
      messages: [
        { role: "system", content: "be brief" },
        { role: "developer", content: [{ type: "text", text: "really brief" }] },
        { role: "user", content: [{ type: "text", text: "what is" }, { type: "image_url", image_url: { url: "https://example.com/a.png" } }] },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "look", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "call_1", content: "a fox" },
        { role: "user", content: "thanks" },
      ],
    });
    expect(reply.choices[0]?.message.content).toBe("thanks");
  });

  it("refuses an unknown role with 400 naming messages[i].role", async () => {
    const error = await client.chat.completions
      .create({ model: "echo", messages: [{ role: "user", content: "hi" }, { role: "bot", content: "x" } as never] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, param: "messages[1].role", message: expect.stringContaining("Supported values are") });
  });

  it("refuses a tool message without tool_call_id, an assistant message with neither content nor tool calls, and unknown part types", async () => {
    expect((await post({ model: "echo", messages: [{ role: "tool", content: "x" }] })).body.error?.param).toBe("messages[0].tool_call_id");
    expect((await post({ model: "echo", messages: [{ role: "assistant" }] })).body.error?.param).toBe("messages[0].content");
    const part = await post({ model: "echo", messages: [{ role: "user", content: [{ type: "text", text: "a" }, { type: "video" }] }] });
    expect(part).toMatchObject({ status: 400, body: { error: { param: "messages[0].content[1].type" } } });
    expect((await post({ model: "echo", messages: [{ role: "user", content: 42 }] })).body.error?.param).toBe("messages[0].content");
  });

  it("names an unknown model, and shows a refused role, in 100 characters at most, however long the value sent (an answer repeated all of it)", async () => {
    const { status, body } = await post({ model: "m".repeat(500_000), messages: [{ role: "user", content: "hi" }] });
    expect(status).toBe(404);
    expect(body.error?.message).toContain(`The model \`${"m".repeat(100)}\` does not exist`);
    expect(body.error?.message.length).toBeLessThan(300);
    const role = await post({ model: "echo", messages: [{ role: "r".repeat(500_000), content: "hi" }] });
    expect(role.status).toBe(400);
    expect(role.body.error?.message.length).toBeLessThan(300);
    // A name that is a property of every object is no video model.
    expect((await post({ model: "constructor", messages: [{ role: "user", content: "hi" }] })).body.error?.message).not.toContain("video model");
  });

  it("refuses n > 1 with 400 naming n, and accepts n = 1", async () => {
    const error = await client.chat.completions.create({ model: "echo", n: 2, messages: [{ role: "user", content: "hi" }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ param: "n", message: expect.stringContaining("only n=1 is supported") });
    const one = await client.chat.completions.create({ model: "echo", n: 1, messages: [{ role: "user", content: "hi" }] });
    expect(one.choices).toHaveLength(1);
  });

  it("names messages[i].role for any role OpenAI does not know, wherever it is", async () => {
    const role = fc.string({ minLength: 1, maxLength: 12 }).filter((value) => !(CHAT_ROLES as readonly string[]).includes(value));
    await fc.assert(
      fc.asyncProperty(role, fc.nat({ max: 3 }), async (bad, before) => {
        const messages = [...Array.from({ length: before }, () => ({ role: "user", content: "ok" })), { role: bad, content: "x" }];
        const answer = await post({ model: "echo", messages });
        expect(answer.status).toBe(400);
        expect(answer.body.error?.param).toBe(`messages[${before}].role`);
      }),
      { numRuns: 40 },
    );
  });
});
