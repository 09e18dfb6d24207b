import type { ChatModelConfig } from "../../../contracts/chat.ts";
import type { z } from "zod";
import type { ModelList } from "../../../contracts/openAiApi.ts";
import type { ReelayConfig } from "../../../contracts/config.ts";
import type { Logger } from "../../shared/log.ts";
import { EchoProvider } from "./providers/echo/echoProvider.ts";
import { OpenAICompatibleProvider } from "./providers/openaiCompatible/openaiCompatibleProvider.ts";
import type { ChatProvider } from "./providers/types.ts";

export interface ChatModel {
  name: string;
  config: ChatModelConfig;
  provider: ChatProvider;
}

/** The configured chat models with their providers, built once at start. */
export function buildChatModels(config: ReelayConfig, log: Logger): Map<string, ChatModel> {
  const echo = new EchoProvider();
  const models = new Map<string, ChatModel>();
  for (const [name, model] of Object.entries(config.chatModels)) {
    if (model.provider === "openai-compatible" && !process.env[model.apiKeyEnv]) {
      // Not fatal: the rest of the service is fine, and this model answers 502 until the key is set.
      log.warn({ model: name, env: model.apiKeyEnv }, "chat model's upstream key is not set; the model will answer 502");
    }
    const provider = model.provider === "echo" ? echo : new OpenAICompatibleProvider(model, log);
    models.set(name, { name, config: model, provider });
  }
  return models;
}

/** `GET /models`: chat and enabled video models in OpenAI's list shape. */
export function modelList(config: ReelayConfig, created: number): z.input<typeof ModelList> {
  const names = [
    ...Object.keys(config.chatModels),
    ...Object.entries(config.videoModels)
      .filter(([, model]) => model.enabled)
      .map(([name]) => name),
  ];
  return { object: "list", data: names.map((id) => ({ id, object: "model", created, owned_by: "reelay" })) };
}
