import type { ChatUsage } from "../../../../../contracts/chat.ts";
import type { ChatRequest } from "../../chatRequest.ts";
import type { ResponseSink } from "../../responseSink.ts";
import type { ChatProvider } from "../types.ts";

/**
 * The built-in `echo` model: a connectivity check that needs no upstream. It answers with the text of
 * the last user message, word by word when streaming, in exactly OpenAI's shapes.
 *
 * Token counting is deliberately simple and documented: one token per whitespace-separated word of text
 * content. Prompt tokens count every message's text; completion tokens count the reply's words.
 */

interface TextPart {
  type: "text";
  text: string;
}
const isTextPart = (part: unknown): part is TextPart =>
  typeof part === "object" && part !== null && (part as TextPart).type === "text" && typeof (part as TextPart).text === "string";

/** A message's text: `content` as a string, or its text parts joined (images and audio have none). */
function textOf(message: unknown): string {
  if (typeof message !== "object" || message === null) return "";
  const content = (message as { content?: unknown }).content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.filter(isTextPart).map((part) => part.text).join("\n");
  return "";
}

const roleOf = (message: unknown): unknown => (typeof message === "object" && message !== null ? (message as { role?: unknown }).role : undefined);

export const countWords = (text: string): number => text.match(/\S+/g)?.length ?? 0;

/** Pieces that concatenate back to `text` exactly, one per word (leading whitespace attached). */
export function wordPieces(text: string): string[] {
  const pieces: string[] = text.match(/\s*\S+/g) ?? [];
  const tail = text.slice(pieces.reduce((length, piece) => length + piece.length, 0));
  if (tail === "") return pieces;
  if (pieces.length === 0) return [tail];
  pieces[pieces.length - 1] += tail;
  return pieces;
}

export function echoReply(messages: readonly unknown[]): { content: string; usage: ChatUsage } {
  const lastUser = [...messages].reverse().find((message) => roleOf(message) === "user");
  const content = textOf(lastUser);
  const prompt = messages.reduce<number>((sum, message) => sum + countWords(textOf(message)), 0);
  const completion = countWords(content);
  return { content, usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } };
}

// Many words per socket write: one event per word on the wire, without one uWS write per word.
const EVENTS_PER_WRITE = 64;

const waitForDrain = (sink: ResponseSink) => new Promise<void>((resolve) => sink.onDrain(resolve));

export class EchoProvider implements ChatProvider {
  async complete(request: ChatRequest, sink: ResponseSink): Promise<ChatUsage | undefined> {
    const { content, usage } = echoReply(request.messages);
    const id = `chatcmpl-${sink.requestId.slice(4)}`;
    const created = Math.floor(Date.now() / 1000);
    if (!request.stream) {
      const completion = {
        id,
        object: "chat.completion",
        created,
        model: request.model,
        choices: [{ index: 0, message: { role: "assistant", content, refusal: null, annotations: [] }, logprobs: null, finish_reason: "stop" }],
        usage,
      };
      sink.reply(200, "application/json", JSON.stringify(completion));
      return usage;
    }
    const event = (choices: unknown[], extra?: { usage: ChatUsage }) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: request.model, choices, ...extra })}\n\n`;
    const delta = (fields: Record<string, unknown>, finishReason: string | null = null) => [
      { index: 0, delta: fields, logprobs: null, finish_reason: finishReason },
    ];
    const events = [event(delta({ role: "assistant", content: "" }))];
    for (const piece of wordPieces(content)) events.push(event(delta({ content: piece })));
    events.push(event(delta({}, "stop")));
    if (request.clientWantsUsage) events.push(event([], { usage }));
    events.push("data: [DONE]\n\n");
    for (let start = 0; start < events.length && sink.open; start += EVENTS_PER_WRITE) {
      if (!sink.write(events.slice(start, start + EVENTS_PER_WRITE).join(""))) await waitForDrain(sink);
    }
    if (!sink.open) return undefined;
    sink.end();
    return usage;
  }
}
