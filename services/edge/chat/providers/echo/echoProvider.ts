import type { ChatUsage } from "../../../../../contracts/chat.ts";
import type { ChatRequest } from "../../chatRequest.ts";
import type { ResponseSink } from "../../responseSink.ts";
import type { RelayedContent } from "../../relayedContent.ts";
import type { ChatProvider } from "../types.ts";
import { echoReply, wordPieces } from "./echoText.ts";

/**
 * The built-in `echo` model: a connectivity check that needs no upstream. It answers with the text of
 * the last user message, word by word when streaming, in exactly OpenAI's shapes.
 */

// Many words per socket write: one event per word on the wire, without one write per word.
const EVENTS_PER_WRITE = 64;

const waitForDrain = (sink: ResponseSink) => new Promise<void>((resolve) => sink.onDrain(resolve));

export class EchoProvider implements ChatProvider {
  async complete(request: ChatRequest, sink: ResponseSink, relayed: RelayedContent): Promise<ChatUsage | undefined> {
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
    // Events are made as the client takes them: only one write's worth exists at a time.
    function* events(): Generator<string> {
      yield event(delta({ role: "assistant", content: "" }));
      for (const piece of wordPieces(content)) {
        // Counted as it is made: a client that leaves mid-answer is billed for the pieces made so far.
        relayed.addText(piece);
        yield event(delta({ content: piece }));
      }
      yield event(delta({}, "stop"));
      if (request.clientWantsUsage) yield event([], { usage });
      yield "data: [DONE]\n\n";
    }
    let batch: string[] = [];
    for (const next of events()) {
      batch.push(next);
      if (batch.length < EVENTS_PER_WRITE) continue;
      const accepted = sink.write(batch.join(""));
      batch = [];
      if (!accepted) await waitForDrain(sink);
      if (!sink.open) return undefined;
    }
    if (!sink.open) return undefined;
    sink.end(batch.join(""));
    return usage;
  }
}
