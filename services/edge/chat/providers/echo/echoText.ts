import type { ChatUsage } from "../../../../../contracts/chat.ts";

/**
 * The text side of the `echo` model, written so that memory stays O(one piece) whatever the message
 * size: a 1 MiB message must not become hundreds of thousands of strings (issue 8: one such request cost
 * about 220 MiB and two dozen took the process down).
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
export function textOf(message: unknown): string {
  if (typeof message !== "object" || message === null) return "";
  const content = (message as { content?: unknown }).content;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.filter(isTextPart).map((part) => part.text).join("\n");
  return "";
}

const roleOf = (message: unknown): unknown => (typeof message === "object" && message !== null ? (message as { role?: unknown }).role : undefined);

/** Counts words without materialising them (`match(/\S+/g)` would allocate one string per word). */
export function countWords(text: string): number {
  const word = /\S+/g;
  let count = 0;
  while (word.exec(text) !== null) count += 1;
  return count;
}

/**
 * At most this many content events per answer: a message of half a million one-letter words would
 * otherwise become half a million SSE events of ~200 bytes each (100× the input on the wire). Short
 * messages still stream one word per event; long ones carry several words per event.
 */
export const MAX_CONTENT_EVENTS = 2048;

/**
 * Pieces that concatenate back to `text` exactly, produced lazily: each is one or more whole words
 * (leading whitespace attached) of at least `minChars` characters, and the last carries any trailing
 * whitespace. A text with no words is one piece (or none when empty).
 */
export function* wordPieces(text: string, minChars = Math.ceil(text.length / MAX_CONTENT_EVENTS)): Generator<string> {
  const word = /\s*\S+/y;
  const more = /\S/g;
  let pieceStart = 0;
  let end = 0;
  for (;;) {
    word.lastIndex = end;
    if (word.exec(text) === null) break;
    end = word.lastIndex;
    if (end - pieceStart < minChars) continue;
    more.lastIndex = end;
    // The last word takes the trailing whitespace with it.
    if (!more.test(text)) break;
    yield text.slice(pieceStart, end);
    pieceStart = end;
  }
  if (pieceStart < text.length) yield text.slice(pieceStart);
}

export function echoReply(messages: readonly unknown[]): { content: string; usage: ChatUsage } {
  let lastUser: unknown;
  for (let i = messages.length - 1; i >= 0 && lastUser === undefined; i--) if (roleOf(messages[i]) === "user") lastUser = messages[i];
  const content = textOf(lastUser);
  const prompt = messages.reduce<number>((sum, message) => sum + countWords(textOf(message)), 0);
  const completion = countWords(content);
  return { content, usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } };
}
