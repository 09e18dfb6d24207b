import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { echoReply, MAX_CONTENT_EVENTS, wordPieces } from "../services/edge/chat/providers/echo/echoText.ts";
import { SseRelay } from "../services/edge/chat/providers/openaiCompatible/sseRelay.ts";

const event = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
const content = (text: string) => event({ object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: text } }], usage: null });
const usageChunk = event({ object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 11, completion_tokens: 22, total_tokens: 33 } });
const DONE = "data: [DONE]\n\n";

/** Feeds the stream to a relay in pieces of `size` bytes and returns what it forwards. */
function relayInPieces(stream: string, size: number, forwardUsage: boolean) {
  const relay = new SseRelay(forwardUsage);
  const bytes = Buffer.from(stream);
  let out = "";
  for (let at = 0; at < bytes.length; at += size) out += relay.push(bytes.subarray(at, at + size))?.toString() ?? "";
  out += relay.flush()?.toString() ?? "";
  return { out, relay };
}

describe("SSE relay", () => {
  const stream = content("hello ") + content('the "usage": {} of data: [DONE] words') + usageChunk + DONE;

  it("forwards complete events byte for byte, however the upstream's reads are cut", () => {
    for (const size of [1, 7, 64, stream.length]) {
      const { out, relay } = relayInPieces(stream, size, true);
      expect(out).toBe(stream);
      expect(relay.usage).toEqual({ prompt_tokens: 11, completion_tokens: 22, total_tokens: 33 });
      expect(relay.sawDone).toBe(true);
    }
  });

  it("bills the usage chunk but drops it for a client that did not ask for usage", () => {
    for (const size of [3, stream.length]) {
      const { out, relay } = relayInPieces(stream, size, false);
      expect(out).toBe(content("hello ") + content('the "usage": {} of data: [DONE] words') + DONE);
      expect(relay.usage?.completion_tokens).toBe(22);
    }
  });

  it("keeps usage that rides on a content chunk, since that chunk carries content", () => {
    const combined = event({ choices: [{ index: 0, delta: { content: "x" } }], usage: { prompt_tokens: 1, completion_tokens: 2 } }) + DONE;
    const { out, relay } = relayInPieces(combined, 5, false);
    expect(out).toBe(combined);
    expect(relay.usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 2 });
  });

  it("reads a usage past any chat's (9e15 tokens) as none, so reelay counts the answer itself: charged as reported, it made a ledger event no one could read", () => {
    const absurd = event({ choices: [], usage: { prompt_tokens: 9e15, completion_tokens: 9e15 } }) + DONE;
    const { relay } = relayInPieces(absurd, 7, true);
    expect(relay.usage).toBeUndefined();
  });

  it("understands CRLF framing and multi-line data", () => {
    const crlf = `data: {"choices":[],\r\ndata: "usage":{"prompt_tokens":4,"completion_tokens":5}}\r\n\r\ndata: [DONE]\r\n\r\n`;
    const { out, relay } = relayInPieces(crlf, 4, false);
    expect(relay.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 5 });
    expect(out).toBe("data: [DONE]\r\n\r\n");
  });

  it("does not take [DONE] inside content for the end, and reports a stream that never ended", () => {
    const { relay } = relayInPieces(content("data: [DONE]") + content("more"), 10, true);
    expect(relay.sawDone).toBe(false);
  });

  it("flushes a final event that lacks its blank line", () => {
    const { out, relay } = relayInPieces(content("a") + "data: [DONE]", 8, true);
    expect(out).toBe(content("a") + DONE);
    expect(relay.sawDone).toBe(true);
  });
});

describe("echo model", () => {
  it("splits a reply into one piece per word that concatenate back exactly", () => {
    for (const text of ["", "   ", "one", " lead and trail  ", "tabs\tand\nnewlines"]) expect([...wordPieces(text)].join("")).toBe(text);
    expect([...wordPieces(" a  b ")]).toEqual([" a", "  b "]);
  });

  it("groups the words of a long reply so that an answer has a bounded number of events", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("a", "bb", " ", "\n", "é"), maxLength: 20_000 }), (text) => {
        const pieces = [...wordPieces(text)];
        expect(pieces.join("")).toBe(text);
        expect(pieces.length).toBeLessThanOrEqual(MAX_CONTENT_EVENTS + 1);
      }),
      { numRuns: 200 },
    );
    const long = "a ".repeat(500_000);
    let count = 0;
    for (const _piece of wordPieces(long)) count += 1;
    expect(count).toBeLessThanOrEqual(MAX_CONTENT_EVENTS + 1);
  });

  it("counts one token per word over every message's text", () => {
    const { content, usage } = echoReply([
      { role: "system", content: "two words" },
      { role: "user", content: [{ type: "text", text: "three more words" }, { type: "image_url", image_url: { url: "x" } }] },
      { role: "assistant", content: null, tool_calls: [] },
    ]);
    expect(content).toBe("three more words");
    expect(usage).toEqual({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
  });
});
