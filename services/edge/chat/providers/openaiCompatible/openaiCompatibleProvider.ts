import type { IncomingMessage } from "node:http";
import { ChatUsage, type OpenAICompatibleChatModel } from "../../../../../contracts/chat.ts";
import { UpstreamError, UpstreamTimeoutError } from "../../../../shared/errors.ts";
import type { Logger } from "../../../../shared/log.ts";
import { withDetail } from "../../chatErrors.ts";
import { upstreamBody, type ChatRequest } from "../../chatRequest.ts";
import type { ResponseSink } from "../../responseSink.ts";
import type { ChatProvider } from "../types.ts";
import { SseRelay } from "./sseRelay.ts";
import { upstreamFailure } from "./upstreamErrors.ts";
import { readAll, UpstreamExchange } from "./upstreamHttp.ts";

/** Bounds on what we buffer from an upstream that does not stream (a completion is kilobytes). */
const MAX_JSON_BYTES = 32 * 1024 * 1024;
const MAX_ERROR_BYTES = 64 * 1024;

/** Relays chat completions to one OpenAI-compatible upstream model. */
export class OpenAICompatibleProvider implements ChatProvider {
  private readonly url: URL;

  constructor(private readonly model: OpenAICompatibleChatModel, private readonly log: Logger) {
    this.url = new URL(`${model.baseUrl}/chat/completions`);
  }

  complete(request: ChatRequest, sink: ResponseSink): Promise<ChatUsage | undefined> {
    // Read per request, so a key rotated in the environment of a restarted process is simply picked up.
    const key = process.env[this.model.apiKeyEnv];
    if (!key) {
      this.log.error({ model: request.model, env: this.model.apiKeyEnv }, "chat upstream key is not set in the environment");
      throw withDetail(new UpstreamError(`model ${request.model} is not available: its upstream is not configured`), {
        code: "upstream_not_configured",
      });
    }
    const exchange = new UpstreamExchange(this.url, {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      accept: request.stream ? "text/event-stream" : "application/json",
      "user-agent": "reelay",
    });
    const model = this.model;
    return new Promise((resolve, reject) => {
      let settled = false;
      let paused = false;
      // Until the headers: a deadline (for a non-streaming answer, until its whole body). While streaming:
      // the longest silence, refreshed on every read, not counting time paused for a slow client.
      const timer = setTimeout(function onTimeout() {
        if (paused) timer.refresh();
        else fail(new UpstreamTimeoutError(`the upstream for model ${request.model} did not answer within ${model.timeoutMs} ms`));
      }, model.timeoutMs);
      const settle = (outcome: () => void) => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        outcome();
        return true;
      };
      const fail = (error: unknown) =>
        settle(() => {
          exchange.cancel(error instanceof Error ? error : new UpstreamError(String(error)));
          reject(error);
        });
      const succeed = (usage: ChatUsage | undefined) => settle(() => resolve(usage));
      // The client left: stop the upstream too (it stops generating, and billing us, for nobody).
      sink.onAbort(() => settle(() => {
        exchange.cancel(new UpstreamError("client disconnected"));
        resolve(undefined);
      }));

      exchange.send(Buffer.from(upstreamBody(request, model.upstreamModel))).then((response) => {
        if (settled) return void response.destroy();
        if (response.statusCode !== 200) {
          readAll(response, MAX_ERROR_BYTES).then(
            (body) => fail(upstreamFailure(response.statusCode ?? 0, body, request.model, this.log)),
            () => fail(upstreamFailure(response.statusCode ?? 0, Buffer.alloc(0), request.model, this.log)),
          );
          return;
        }
        if (!request.stream) {
          readAll(response, MAX_JSON_BYTES).then((body) => {
            if (settled) return;
            const usage = usageOf(body);
            if (usage === "invalid") return void fail(new UpstreamError(`the upstream for model ${request.model} answered invalid JSON`));
            sink.reply(200, "application/json", body);
            succeed(usage);
          }, fail);
          return;
        }
        const contentType = response.headers["content-type"] ?? "";
        if (!contentType.includes("text/event-stream")) {
          return void fail(new UpstreamError(`the upstream for model ${request.model} answered a stream request with ${contentType || "no content type"}`));
        }
        this.relayStream(response, request, sink, {
          touch: () => timer.refresh(),
          pause: (value) => (paused = value),
          succeed,
          fail,
        });
      }, fail);
    });
  }

  private relayStream(
    response: IncomingMessage,
    request: ChatRequest,
    sink: ResponseSink,
    hooks: { touch(): void; pause(paused: boolean): void; succeed(usage: ChatUsage | undefined): void; fail(error: unknown): void },
  ): void {
    const relay = new SseRelay(request.clientWantsUsage);
    const resume = () => {
      hooks.pause(false);
      hooks.touch();
      response.resume();
    };
    response.on("data", (chunk: Buffer) => {
      hooks.touch();
      const out = relay.push(chunk);
      // Backpressure: the client is slower than the upstream. Stop reading the upstream socket (TCP then
      // slows the upstream down) until uWS has handed our buffered bytes to the client.
      if (out && out.length > 0 && !sink.write(out)) {
        hooks.pause(true);
        response.pause();
        sink.onDrain(resume);
      }
    });
    response.once("end", () => {
      const tail = relay.flush();
      if (!relay.sawDone) {
        if (tail) sink.write(tail);
        return void hooks.fail(new UpstreamError(`the upstream for model ${request.model} ended the stream early`));
      }
      sink.end(tail);
      hooks.succeed(relay.usage);
    });
    const brokeOff = () => hooks.fail(new UpstreamError(`the upstream for model ${request.model} broke off the stream`));
    response.once("error", brokeOff);
    response.once("close", () => {
      if (!response.complete) brokeOff();
    });
  }
}

/** The usage of a non-streaming completion; "invalid" when the body is not JSON at all. */
function usageOf(body: Buffer): ChatUsage | undefined | "invalid" {
  try {
    const parsed: unknown = JSON.parse(body.toString("utf8"));
    if (typeof parsed !== "object" || parsed === null) return "invalid";
    const usage = ChatUsage.safeParse((parsed as { usage?: unknown }).usage);
    return usage.success ? usage.data : undefined;
  } catch {
    return "invalid";
  }
}
