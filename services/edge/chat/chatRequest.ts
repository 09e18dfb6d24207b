import { ChatRequestEnvelope } from "../../../contracts/chat.ts";
import { ValidationError } from "../../shared/errors.ts";
import { parseJsonBody } from "../http/request.ts";

/** A chat request as the relay sees it: the client's JSON untouched, plus the few fields we route on. */
export interface ChatRequest {
  /** Exactly what the client sent, parsed; providers copy it and change only `model` (and stream_options). */
  body: Record<string, unknown>;
  model: string;
  messages: unknown[];
  stream: boolean;
  /** The client asked for the final usage chunk (`stream_options.include_usage`). */
  clientWantsUsage: boolean;
  /** The client's bound on the answer (the larger of `max_completion_tokens` and `max_tokens`), if it set one. */
  maxAnswerTokens: number | undefined;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Validates only what routing and billing need; everything else is the upstream's to judge, so a new
 * OpenAI parameter works through reelay the day the upstream supports it.
 */
export function parseChatRequest(raw: Buffer): ChatRequest {
  const json = parseJsonBody(raw);
  if (!isPlainObject(json)) throw new ValidationError("request body must be a JSON object");
  const parsed = ChatRequestEnvelope.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    // OpenAI's spelling of a field: messages[2].content[0].type
    const param = issue?.path.reduce<string>((name, key) => (typeof key === "number" ? `${name}[${key}]` : name ? `${name}.${String(key)}` : String(key)), "") || null;
    const message = issue?.message ?? "invalid request";
    throw new ValidationError(param ? `${param}: ${message}` : message, { param });
  }
  const envelope = parsed.data;
  return {
    body: json,
    model: envelope.model,
    messages: envelope.messages,
    stream: envelope.stream === true,
    clientWantsUsage: envelope.stream === true && envelope.stream_options?.include_usage === true,
    maxAnswerTokens: maxOf(envelope.max_completion_tokens, envelope.max_tokens),
  };
}

function maxOf(...bounds: Array<number | null | undefined>): number | undefined {
  const set = bounds.filter((bound): bound is number => typeof bound === "number");
  return set.length === 0 ? undefined : Math.max(...set);
}

/**
 * The body for an OpenAI-compatible upstream: the client's, re-addressed to the upstream model. Streams
 * always ask for usage so they can be billed; the relay hides the usage chunk from clients that did not
 * ask for it. Other stream_options the client set are kept. A request with no bound on its answer gets the
 * model's (`answerCap`, what was reserved), so the answer cannot cost more than its reservation.
 */
export function upstreamBody(request: ChatRequest, upstreamModel: string, answerCap: number): string {
  const body: Record<string, unknown> = { ...request.body, model: upstreamModel };
  if (request.maxAnswerTokens === undefined) body.max_completion_tokens = answerCap;
  if (request.stream) {
    const own = request.body.stream_options;
    body.stream_options = { ...(isPlainObject(own) ? own : {}), include_usage: true };
  }
  return JSON.stringify(body);
}
