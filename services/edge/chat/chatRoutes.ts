import type { ApiKeyRecord } from "../../../contracts/apiKey.ts";
import type { ChatUsage } from "../../../contracts/chat.ts";
import type { ReelayConfig } from "../../../contracts/config.ts";
import { NATS_DOWN, NotFoundError, ServiceUnavailableError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import type { ApiKeyDirectory } from "../auth.ts";
import { environment } from "../../shared/environment.ts";
import { chatTimeToFirstChunk } from "../../shared/metrics/metrics.ts";
import type { RouteContract } from "../../../contracts/httpRoute.ts";
import { OPENAI_API, SPEC_CHAT } from "../../../contracts/openAiApi.ts";
import { sinkRoute, type SinkHandler, type TableRoute } from "../http/routeTable.ts";
import { InFlightPerAccount } from "../inFlightPerAccount.ts";
import { buildChatModels, modelList, type ChatModel } from "./chatModels.ts";
import { answerTokenBound, promptTokens } from "./chatEstimate.ts";
import { parseChatRequest } from "./chatRequest.ts";
import { RelayedContent } from "./relayedContent.ts";
import type { ResponseSink } from "./responseSink.ts";
import type { ChatUsageMeter } from "../../billing/chatUsageMeter.ts";

export interface ChatRouteDeps {
  config: ReelayConfig;
  keys: ApiKeyDirectory;
  meter: ChatUsageMeter;
  /** Whether the NATS connection is up: while it is down, completions answer 503 at once. */
  connection: { connected(): boolean };
  log: Logger;
}

const MODELS_SEGMENT = "/models/";

const safeDecode = (text: string): string => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};

/** The sink, timing its first streamed chunk for `reelay_chat_time_to_first_chunk_seconds`. */
function timedFirstChunk(sink: ResponseSink, model: string): ResponseSink {
  const started = performance.now();
  let first = true;
  const observe = () => {
    if (!first) return;
    first = false;
    chatTimeToFirstChunk.labels({ model }).observe((performance.now() - started) / 1000);
  };
  return {
    get requestId() {
      return sink.requestId;
    },
    get open() {
      return sink.open;
    },
    get streaming() {
      return sink.streaming;
    },
    onAbort: (listener) => sink.onAbort(listener),
    reply: (...args) => sink.reply(...args),
    write: (chunk) => {
      observe();
      return sink.write(chunk);
    },
    onDrain: (resume) => sink.onDrain(resume),
    // A short stream may go out whole with its end.
    end: (last) => {
      if (last !== undefined) observe();
      sink.end(last);
    },
  };
}

/**
 * The OpenAI-compatible chat surface: chat completions at the spec's path and, under each OpenAI base
 * (`/api/compat`, `/v1`), at the path client libraries append to their base URL, with the model list those
 * libraries (and users) ask for.
 */
export function chatRoutes(deps: ChatRouteDeps): TableRoute[] {
  const { config, keys, meter, connection, log } = deps;
  const measured = environment().REELAY_METRICS === "on";
  const models = buildChatModels(config, log);
  const created = Math.floor(Date.now() / 1000);
  const inFlight = new InFlightPerAccount(
    config.limits.chatRequestsPerAccount,
    (limit) => `Too many chat completions in flight for this account (at most ${limit} at once per gateway node): wait for one to finish, then try again.`,
  );

  const findModel = (name: string): ChatModel => {
    const model = models.get(name);
    if (model) return model;
    const hint = Object.hasOwn(config.videoModels, name) ? " (it is a video model: use POST /api/compat/videosGenerations)" : "";
    // The client's name, cut: a body may be a name of a million characters, and the answer would repeat it.
    throw new NotFoundError(`The model \`${name.slice(0, 100)}\` does not exist or you do not have access to it${hint}.`, {
      param: "model",
      code: "model_not_found",
    });
  };

  const complete = async (key: ApiKeyRecord, body: Buffer | undefined, sink: ResponseSink): Promise<void> => {
    const request = parseChatRequest(body ?? Buffer.alloc(0));
    const model = findModel(request.model);
    // The hold could not be written, and would wait for a timeout: say so at once.
    if (!connection.connected()) throw new ServiceUnavailableError(NATS_DOWN);
    const bill = {
      account: key.account,
      model: model.name,
      requestId: sink.requestId,
      inputPricePerMillionTokens: model.config.inputPricePerMillionTokens,
      outputPricePerMillionTokens: model.config.outputPricePerMillionTokens,
    };
    const leave = inFlight.enter(key.account);
    try {
      const prompt = promptTokens(request);
      await meter.reserve({ ...bill, promptTokens: prompt, maxCompletionTokens: answerTokenBound(request, model.config.maxCompletionTokens) });
      const relayed = new RelayedContent();
      let usage: ChatUsage | undefined;
      try {
        if (sink.open) usage = await model.provider.complete(request, measured ? timedFirstChunk(sink, model.name) : sink, relayed);
      } finally {
        // However the answer ended, the hold is closed: on the upstream's usage, else on what reached the client.
        const tokens = usage
          ? { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens, counted: false }
          : { promptTokens: relayed.empty ? 0 : prompt, completionTokens: relayed.empty ? 0 : relayed.tokens(), counted: true };
        meter
          .charge({ ...bill, ...tokens })
          .catch((error: unknown) => log.error({ err: error, account: key.account, requestId: sink.requestId }, "a chat usage charge could not be written: the request goes unpaid, and its hold lapses"));
      }
    } finally {
      leave();
    }
  };

  const chat: SinkHandler<RouteContract> = ({ request, body }, sink) => keys.withAccount(request.header("authorization"), (key) => complete(key, body, sink));
  const catalogue = modelList(config, created);
  const list = JSON.stringify(catalogue);
  const withBody = { maxBodyBytes: config.limits.maxBodyBytes };
  return [
    ...sinkRoute(SPEC_CHAT, chat, withBody),
    // The same handlers at every OpenAI base.
    ...sinkRoute(OPENAI_API.chat, chat, withBody),
    ...sinkRoute(OPENAI_API.models, ({ request }, sink) => keys.withAccount(request.header("authorization"), () => sink.reply(200, "application/json", list))),
    ...sinkRoute(
      OPENAI_API.model,
      ({ request }, sink) =>
        keys.withAccount(request.header("authorization"), () => {
          // The id is all after the base's `/models/` (the first one): ids may contain slashes ("org/model").
          const id = safeDecode(request.url.slice(request.url.indexOf(MODELS_SEGMENT) + MODELS_SEGMENT.length));
          const entry = catalogue.data.find((model) => model.id === id);
          if (!entry) throw new NotFoundError(`The model \`${id.slice(0, 100)}\` does not exist.`, { param: "model", code: "model_not_found" });
          sink.reply(200, "application/json", JSON.stringify(entry));
        }),
      { restParameter: true },
    ),
  ];
}
