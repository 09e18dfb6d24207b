import { countTokens as exactTokens } from "gpt-tokenizer/encoding/o200k_base";
import { describe, expect, it } from "vitest";
import { RelayedContent } from "../services/edge/chat/relayedContent.ts";
import { countTokens } from "../services/edge/chat/tokenCount.ts";

const chunk = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta }] })}\n\n`;

describe("what reached the client, counted when the upstream reports no usage", () => {
  it("counts the deltas' text, refusals, reasoning and tool calls; not the usage chunk, not [DONE]", () => {
    const relayed = new RelayedContent();
    relayed.addEvents(Buffer.from(chunk({ role: "assistant", content: "" }) + chunk({ content: "Hello there" }) + chunk({ reasoning_content: " thinking" })));
    relayed.addEvents(Buffer.from(chunk({ tool_calls: [{ index: 0, function: { name: "lookup", arguments: '{"q":"x"}' } }] }) + 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\ndata: [DONE]\n\n'));
    expect(relayed.tokens()).toBe(exactTokens('Hello there thinkinglookup{"q":"x"}'));
  });

  it("counts a whole completion's message", () => {
    const relayed = new RelayedContent();
    relayed.addCompletion({ choices: [{ message: { role: "assistant", content: "one two three", refusal: null } }] });
    expect(relayed.tokens()).toBe(exactTokens("one two three"));
  });

  it("nothing relayed is nothing to charge", () => {
    expect(new RelayedContent().empty).toBe(true);
  });

  it("a huge or hostile text costs bounded time and memory: its start counted exactly, the rest at the same rate", () => {
    const prose = "The quick brown fox jumps over the lazy dog. ".repeat(25_000);
    const started = performance.now();
    const counted = countTokens(prose);
    const hostile = countTokens(Array.from({ length: 200_000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join(""));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(Math.abs(counted - exactTokens(prose)) / exactTokens(prose)).toBeLessThan(0.02);
    expect(hostile).toBeGreaterThan(200_000);
  });
});
