import { countTokens as exactTokens } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { promptTokens } from "../services/edge/chat/chatEstimate.ts";
import { PROMPT_EXACT_CHARS, TokenBudget } from "../services/edge/chat/tokenCount.ts";

/** Text as a hostile client would send it: letters without spaces, the tokenizer's slow case, never twice the same. */
function randomLetters(length: number, seed: number): string {
  let state = seed;
  let text = "";
  for (let i = 0; i < length; i++) {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    text += String.fromCharCode(97 + (state % 26));
  }
  return text;
}

const PROSE = "The quick brown fox jumps over the lazy dog, and then it rests in the shade of an old oak tree. ";

describe("a chat prompt's tokens, counted for its hold", () => {
  it("given a body of 1 MiB in 240 messages of 4 KiB, then at most PROMPT_EXACT_CHARS characters of all of them are counted exactly (the edge's thread was held about a second per such request)", () => {
    const messages = Array.from({ length: 240 }, (_, i) => ({ role: "user", content: randomLetters(4096, i + 1) }));
    const budget = new TokenBudget(PROMPT_EXACT_CHARS);
    const tokens = promptTokens({ messages, body: {} }, budget);
    // What bounds the edge's time: the tokenizer saw no more than this (the time itself is bench/tools/hostileChatStall.ts's).
    expect(budget.exactChars).toBe(PROMPT_EXACT_CHARS);
    // The rest at the counted rate: about what counting it all would give (the tokenizer's cost, not its answer, was the problem).
    const sample = exactTokens(messages[0]?.content ?? "");
    expect(tokens).toBeGreaterThan(0.9 * 240 * sample);
  });

  it("given prose over many messages, then the estimate is within 2% of counting every message exactly", () => {
    const messages = Array.from({ length: 200 }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: PROSE.repeat(3 + (i % 5)) }));
    const exact = 3 + messages.reduce((sum, message) => sum + 4 + exactTokens(message.content), 0);
    expect(Math.abs(promptTokens({ messages, body: {} }) - exact) / exact).toBeLessThan(0.02);
  });

  it("given a prompt within the budget, then it is counted exactly: OpenAI's framing, names, tool calls and tool definitions", () => {
    const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object" } } }];
    const toolCalls = [{ id: "c1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }];
    const messages = [
      { role: "system", content: "Be brief." },
      { role: "user", name: "ann", content: [{ type: "text", text: "Hello there" }] },
      { role: "assistant", content: null, tool_calls: toolCalls },
    ];
    const expected = 3 + (4 + exactTokens("Be brief.")) + (4 + exactTokens("ann") + exactTokens("Hello there")) + (4 + exactTokens(JSON.stringify(toolCalls))) + exactTokens(JSON.stringify(tools));
    expect(promptTokens({ messages, body: { tools } })).toBe(expected);
  });

  it("given a text past the budget, then what is left of it is taken at the rate counted, never as nothing", () => {
    const budget = new TokenBudget(1024);
    const text = PROSE.repeat(40);
    // Counted in slices of 512 characters, as the budget counts.
    const counted = exactTokens(text.slice(0, 512)) + exactTokens(text.slice(512, 1024));
    expect(budget.count(text)).toBe(counted + Math.ceil(((text.length - 1024) * counted) / 1024));
    // The budget is spent: a later text is taken at the request's rate.
    expect(budget.count(PROSE)).toBeGreaterThan(0);
    expect(budget.exactChars).toBe(1024);
  });
});
