import { PROMPT_EXACT_CHARS, TokenBudget } from "./tokenCount.ts";
import type { ChatRequest } from "./chatRequest.ts";

/** OpenAI's framing per message (role, separators) and for priming the reply, in tokens. */
const PER_MESSAGE = 4;
const REPLY_PRIMING = 3;
/**
 * A non-text part (an image, audio, a file): counted as this many tokens, whatever its bytes. A high-detail
 * image is at most about 1,500 tokens at OpenAI; base64 bytes counted as text would hold hundreds of times
 * more than the upstream charges. An underestimate only costs the house: a charge never passes the account's
 * credit limit (services/billing/account.ts).
 */
const NON_TEXT_PART = 1_500;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

function messageTokens(message: unknown, budget: TokenBudget): number {
  if (!isRecord(message)) return PER_MESSAGE;
  let tokens = PER_MESSAGE;
  const { content, name, tool_calls } = message;
  if (typeof content === "string") tokens += budget.count(content);
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (isRecord(part) && typeof part.text === "string") tokens += budget.count(part.text);
      else tokens += NON_TEXT_PART;
    }
  }
  if (typeof name === "string") tokens += budget.count(name);
  if (tool_calls !== undefined) tokens += budget.count(JSON.stringify(tool_calls));
  return tokens;
}

/**
 * The prompt's tokens as reelay counts them: the messages' text with OpenAI's framing, plus the tool and
 * response-format definitions the upstream also reads (as their JSON, which counts a little more than the
 * upstream does). All of it within one budget of exactly counted characters (`budget`; PROMPT_EXACT_CHARS by
 * default), the rest at the rate counted: the edge's thread is held a bounded time, whatever the body holds.
 */
export function promptTokens(request: Pick<ChatRequest, "messages" | "body">, budget = new TokenBudget(PROMPT_EXACT_CHARS)): number {
  let tokens = REPLY_PRIMING;
  for (const message of request.messages) tokens += messageTokens(message, budget);
  for (const field of ["tools", "functions", "response_format"]) {
    const definition = request.body[field];
    if (definition !== undefined && definition !== null) tokens += budget.count(JSON.stringify(definition));
  }
  return tokens;
}

/** The most the answer may be: the client's bound, else the model's. */
export const answerTokenBound = (request: ChatRequest, modelCap: number): number => request.maxAnswerTokens ?? modelCap;
