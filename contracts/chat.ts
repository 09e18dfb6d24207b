import { z } from "zod";
import { ChatMessage } from "./chatMessages.ts";

/**
 * Chat models are server-side config: a public model name maps to the built-in `echo` model or to an
 * OpenAI-compatible upstream. Prices are per 1,000,000 tokens, in the same currency as video prices.
 */
const Price = z.number().min(0);
/** Free text for operators reading the config (JSON has no comments); never sent to clients. */
const Description = z.string().optional();

const EchoChatModel = z.strictObject({
  provider: z.literal("echo"),
  description: Description,
  /** Echo costs nothing by default; a price makes it useful for exercising billing end to end. */
  inputPricePerMillionTokens: Price.default(0),
  outputPricePerMillionTokens: Price.default(0),
  maxCompletionTokens: z.number().int().min(1).default(4096),
});

const OpenAICompatibleChatModel = z.strictObject({
  provider: z.literal("openai-compatible"),
  description: Description,
  /** Base URL as OpenAI clients take it, e.g. `https://api.openai.com/v1`; we append `/chat/completions`. */
  baseUrl: z
    .url({ protocol: /^https?$/ })
    .transform((url) => url.replace(/\/+$/, "")),
  /** Name of the environment variable holding the upstream key: keys never live in the config file. */
  apiKeyEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"),
  /** The model name sent upstream in place of the public name. */
  upstreamModel: z.string().min(1),
  inputPricePerMillionTokens: Price,
  outputPricePerMillionTokens: Price,
  /**
   * Longest wait for the upstream's response headers; also the longest silence between two stream reads,
   * and the bound on reading a whole non-streaming body.
   */
  timeoutMs: z.number().int().min(100).max(3_600_000).default(120_000),
  /**
   * The longest answer of a request that sets no `max_completion_tokens`/`max_tokens`: reserved before relaying,
   * and sent upstream as `max_completion_tokens` so the answer cannot outgrow what was reserved.
   */
  maxCompletionTokens: z.number().int().min(1).default(4096),
});

export const ChatModelConfig = z.discriminatedUnion("provider", [EchoChatModel, OpenAICompatibleChatModel]);
export type ChatModelConfig = z.infer<typeof ChatModelConfig>;
export type OpenAICompatibleChatModel = z.infer<typeof OpenAICompatibleChatModel>;

export const ChatModels = z.record(z.string().min(1), ChatModelConfig);
export type ChatModels = z.infer<typeof ChatModels>;

/**
 * What we check of a chat request: what routing and billing need, the messages as OpenAI checks them, and
 * `n`. Everything else (tools, response_format, temperature…) is the upstream's business and is passed
 * through untouched.
 */
export const ChatRequestEnvelope = z.looseObject({
  model: z.string().min(1, "model must name a chat model"),
  messages: z.array(ChatMessage, { error: "messages must be a non-empty array" }).min(1, "messages must be a non-empty array"),
  /** One choice per request: several would multiply a relayed stream's bookkeeping and echo has one answer. */
  n: z
    .number({ error: "n must be an integer" })
    .int("n must be an integer")
    .min(1, "n must be at least 1")
    .max(1, "only n=1 is supported: ask for one choice per request")
    .nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  /** The answer's bound: what is reserved (the model's maxCompletionTokens when neither is set). */
  max_completion_tokens: z.number({ error: "max_completion_tokens must be an integer" }).int("max_completion_tokens must be an integer").min(1, "max_completion_tokens must be at least 1").nullish(),
  max_tokens: z.number({ error: "max_tokens must be an integer" }).int("max_tokens must be an integer").min(1, "max_tokens must be at least 1").nullish(),
  /*
   * Fields that make the upstream bill us more than the model's token prices say are refused, not passed on
   * unpriced: a faster tier (`priority`, `scale`) costs more per token, web search is billed per call, audio
   * output per audio token at its own price. "auto" and "default" are the standard tier.
   */
  service_tier: z.enum(["auto", "default"], { error: 'service_tier: only "auto" and "default" are offered (other tiers are priced differently upstream)' }).nullish(),
  web_search_options: z.null({ error: "web_search_options is not offered: web searches are billed per call, which reelay does not price" }).optional(),
  audio: z.null({ error: "audio output is not offered: audio tokens are priced differently, which reelay does not price" }).optional(),
  modalities: z.array(z.literal("text", { error: 'modalities: only "text" is offered (audio output is priced differently)' })).nullish(),
});
export type ChatRequestEnvelope = z.infer<typeof ChatRequestEnvelope>;

/**
 * More tokens than one chat could be billed for: a count past it is an upstream's bug, and is read as no count
 * (reelay counts the answer itself) rather than moved as money past what the ledger can hold (9e15 tokens made
 * an event the ledger could no longer read, and every later catch-up of the account failed).
 */
export const MAX_BELIEVABLE_TOKENS = 1_000_000_000;
/** OpenAI's usage object; only the counts we bill are required. */
export const ChatUsage = z.looseObject({
  prompt_tokens: z.number().int().min(0).max(MAX_BELIEVABLE_TOKENS),
  completion_tokens: z.number().int().min(0).max(MAX_BELIEVABLE_TOKENS),
  total_tokens: z.number().int().min(0).optional(),
});
export type ChatUsage = z.infer<typeof ChatUsage>;
