import { eventData } from "./providers/openaiCompatible/sseRelay.ts";
import { countTokens, EXACT_CHARS, extrapolate } from "./tokenCount.ts";

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Every string an answer part carries that the client reads: text, refusal, reasoning, tool call names and arguments. */
function collectText(value: unknown, into: (text: string) => void): void {
  if (!isRecord(value)) return;
  for (const field of ["content", "refusal", "reasoning_content", "reasoning"]) {
    const text = value[field];
    if (typeof text === "string") into(text);
  }
  const calls = Array.isArray(value.tool_calls) ? value.tool_calls : [];
  for (const call of calls) {
    const fn = isRecord(call) ? call.function : undefined;
    if (!isRecord(fn)) continue;
    if (typeof fn.name === "string") into(fn.name);
    if (typeof fn.arguments === "string") into(fn.arguments);
  }
}

const EVENT_BOUNDARY = /\r?\n\r?\n/;

/**
 * What reached the client of one chat answer, kept to count its tokens when the upstream reports no usage
 * (the client left, the upstream omitted it). Memory stays bounded whatever the answer's size: the first
 * EXACT_CHARS characters are kept and counted, the rest only measured and taken at the same rate.
 */
export class RelayedContent {
  private kept = "";
  private chars = 0;

  /** Text the client was sent. */
  addText(text: string): void {
    this.chars += text.length;
    if (this.kept.length < EXACT_CHARS) this.kept += text.slice(0, EXACT_CHARS - this.kept.length);
  }

  /** SSE events the client was sent (whole events): each `chat.completion.chunk`'s deltas. */
  addEvents(events: Buffer): void {
    for (const event of events.toString("utf8").split(EVENT_BOUNDARY)) {
      const data = eventData(event);
      if (data === "" || data === "[DONE]") continue;
      let chunk: unknown;
      try {
        chunk = JSON.parse(data);
      } catch {
        continue;
      }
      const choices = isRecord(chunk) && Array.isArray(chunk.choices) ? chunk.choices : [];
      for (const choice of choices) collectText(isRecord(choice) ? choice.delta : undefined, (text) => this.addText(text));
    }
  }

  /** A whole `chat.completion` the client was sent: its messages. */
  addCompletion(completion: unknown): void {
    const choices = isRecord(completion) && Array.isArray(completion.choices) ? completion.choices : [];
    for (const choice of choices) collectText(isRecord(choice) ? choice.message : undefined, (text) => this.addText(text));
  }

  get empty(): boolean {
    return this.chars === 0;
  }

  /** The answer's tokens as reelay counts them. */
  tokens(): number {
    return extrapolate(countTokens(this.kept), this.kept.length, this.chars);
  }
}
