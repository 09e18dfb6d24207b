import { ChatUsage, type OpenAICompatibleChatModel } from "../../../../../contracts/chat.ts";
import { UpstreamError, UpstreamTimeoutError } from "../../../../shared/errors.ts";
import type { Logger } from "../../../../shared/log.ts";
import { withDetail } from "../../chatErrors.ts";
import { upstreamBody, type ChatRequest } from "../../chatRequest.ts";
import type { ResponseSink } from "../../responseSink.ts";
import type { ChatProvider } from "../types.ts";
import { SseRelay } from "./sseRelay.ts";
import { upstreamFailure } from "./upstreamErrors.ts";
import { post, targetOf, type UpstreamTarget } from "./http1Client.ts";

/** Bounds on what we buffer from an upstream that does not stream (a completion is kilobytes). */
const MAX_JSON_BYTES = 32 * 1024 * 1024;
const MAX_ERROR_BYTES = 64 * 1024;

/** Relays chat completions to one OpenAI-compatible upstream model. */
export class OpenAICompatibleProvider implements ChatProvider {
  private readonly target: UpstreamTarget;
  private apiKey: string | undefined;

  constructor(private readonly model: OpenAICompatibleChatModel, private readonly log: Logger) {
    this.target = targetOf(new URL(`${model.baseUrl}/chat/completions`));
  }

  complete(request: ChatRequest, sink: ResponseSink): Promise<ChatUsage | undefined> {
    // Cached once set (process.env is a slow getter), and looked up again while it is missing.
    const key = (this.apiKey ??= process.env[this.model.apiKeyEnv]);
    if (!key) {
      this.log.error({ model: request.model, env: this.model.apiKeyEnv }, "chat upstream key is not set in the environment");
      throw withDetail(new UpstreamError(`model ${request.model} is not available: its upstream is not configured`), {
        code: "upstream_not_configured",
      });
    }
    const headers =
      `authorization: Bearer ${key}\r\ncontent-type: application/json\r\n` +
      `accept: ${request.stream ? "text/event-stream" : "application/json"}\r\nuser-agent: reelay\r\n`;
    const { model, log } = this;
    const name = request.model;
    return new Promise((resolve, reject) => {
      let settled = false;
      let paused = false;
      // Until the headers: a deadline (for a non-streaming answer, until its whole body). While streaming:
      // the longest silence, refreshed on every read, not counting time paused for a slow client.
      const timer = setTimeout(function onTimeout() {
        if (paused) timer.refresh();
        else fail(new UpstreamTimeoutError(`the upstream for model ${name} did not answer within ${model.timeoutMs} ms`));
      }, model.timeoutMs);
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        outcome();
      };
      const fail = (error: unknown) =>
        settle(() => {
          call.cancel();
          reject(error);
        });
      const succeed = (usage: ChatUsage | undefined) => settle(() => resolve(usage));

      // What the body is for, decided by the head: an error to report, a JSON answer, or a stream to relay.
      let collect: { chunks: Buffer[]; size: number; limit: number; done(body: Buffer): void } | undefined;
      let relay: SseRelay | undefined;
      const resume = () => {
        paused = false;
        timer.refresh();
        call.resume();
      };

      const call = post(this.target, headers, Buffer.from(upstreamBody(request, model.upstreamModel)), {
        onHead: (status, responseHeaders) => {
          if (status !== 200) {
            collect = { chunks: [], size: 0, limit: MAX_ERROR_BYTES, done: (body) => fail(upstreamFailure(status, body, name, log)) };
          } else if (!request.stream) {
            collect = {
              chunks: [],
              size: 0,
              limit: MAX_JSON_BYTES,
              done: (body) => {
                const usage = usageOf(body);
                if (usage === "invalid") return fail(new UpstreamError(`the upstream for model ${name} answered invalid JSON`));
                sink.reply(200, "application/json", body);
                succeed(usage);
              },
            };
          } else {
            const contentType = responseHeaders.get("content-type") ?? "";
            if (!contentType.includes("text/event-stream")) {
              return fail(new UpstreamError(`the upstream for model ${name} answered a stream request with ${contentType || "no content type"}`));
            }
            relay = new SseRelay(request.clientWantsUsage);
            timer.refresh();
          }
        },
        onData: (payload) => {
          if (collect) {
            collect.size += payload.length;
            if (collect.size > collect.limit) return fail(new UpstreamError(`the upstream for model ${name} answered more than ${collect.limit} bytes`));
            collect.chunks.push(payload);
            return;
          }
          if (!relay) return;
          timer.refresh();
          const out = relay.push(payload);
          // Backpressure: the client is slower than the upstream. Stop reading the upstream socket (TCP then
          // slows the upstream down) until uWS has handed our buffered bytes to the client.
          if (out && out.length > 0 && !sink.write(out)) {
            paused = true;
            call.pause();
            sink.onDrain(resume);
          }
        },
        onEnd: () => {
          if (collect) return collect.done(Buffer.concat(collect.chunks, collect.size));
          if (!relay) return;
          const tail = relay.flush();
          if (!relay.sawDone) {
            if (tail) sink.write(tail);
            return fail(new UpstreamError(`the upstream for model ${name} ended the stream early`));
          }
          sink.end(tail);
          succeed(relay.usage);
        },
        onError: (error) => fail(relay ? new UpstreamError(`the upstream for model ${name} broke off the stream (${error.message})`) : error),
      });
      // The client left: stop the upstream too (it stops generating, and billing us, for nobody).
      sink.onAbort(() => settle(() => {
        call.cancel();
        resolve(undefined);
      }));
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
