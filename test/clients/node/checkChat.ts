/**
 * reelay chat compatibility check with the official Node `openai` library.
 * Env: REELAY_BASE_URL ({base}/api/compat), REELAY_API_KEY, REELAY_CHAT_MODELS ("model=expected reply prefix|...").
 * Prints one PASS/FAIL line per check; exits 1 if any check failed.
 */
import OpenAI from "openai";

const baseURL = process.env.REELAY_BASE_URL ?? "";
const apiKey = process.env.REELAY_API_KEY ?? "";
const models = (process.env.REELAY_CHAT_MODELS ?? "echo=").split("|").map((entry) => {
  const at = entry.indexOf("=");
  return { model: entry.slice(0, at), prefix: entry.slice(at + 1) };
});
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
let failures = 0;

async function check(name: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
    console.log(`PASS node ${name}`);
  } catch (error) {
    failures++;
    console.log(`FAIL node ${name}: ${(error as Error).name}: ${(error as Error).message}`);
  }
}

function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (actual !== expected) throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}

for (const { model, prefix } of models) {
  await check(`single-turn [${model}]`, async () => {
    const reply = await client.chat.completions.create({ model, messages: [{ role: "user", content: "hello from node" }] });
    expectEqual(reply.choices[0]?.message.content, `${prefix}hello from node`, "reply");
    if (!reply.usage || reply.usage.completion_tokens <= 0) throw new Error("usage missing");
  });
  await check(`multi-turn [${model}]`, async () => {
    const reply = await client.chat.completions.create({
      model,
      messages: [
        { role: "system", content: "you are terse" },
        { role: "user", content: "first" },
        { role: "assistant", content: "ok" },
        { role: "user", content: "second turn" },
      ],
    });
    expectEqual(reply.choices[0]?.message.content, `${prefix}second turn`, "reply");
  });
  await check(`streaming [${model}]`, async () => {
    const stream = await client.chat.completions.create({
      model,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "stream this please" }],
    });
    let text = "";
    let chunks = 0;
    let usageSeen = false;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usageSeen = true;
    }
    if (chunks < 3 || !usageSeen) throw new Error(`expected several chunks and a usage chunk, got ${chunks} chunks, usage seen ${usageSeen}`);
    expectEqual(text, `${prefix}stream this please`, "streamed text");
  });
}
await check("bad-key", async () => {
  const stranger = new OpenAI({ baseURL, apiKey: "rly_not-a-key", maxRetries: 0 });
  const error = await stranger.chat.completions.create({ model: models[0]?.model ?? "echo", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
  if (!(error instanceof OpenAI.AuthenticationError)) throw new Error(`expected AuthenticationError, got ${String(error)}`);
});
process.exit(failures > 0 ? 1 : 0);
