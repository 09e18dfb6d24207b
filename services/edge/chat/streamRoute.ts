import type { Logger } from "../../shared/log.ts";
import { readGatedBody, type BodyGate } from "../http/bodyGate.ts";
import { captureRequest, type RequestInfo } from "../http/request.ts";
import { newRequestId } from "../http/requestId.ts";
import type { NodeHandler } from "../http/route.ts";
import { openAiError, openAiErrorEvent } from "../http/openAiErrors.ts";
import { NodeResponseSink, type ResponseSink } from "./responseSink.ts";

/** A handler that answers through the sink, as one reply or as a stream; it may throw at any point. */
export type StreamHandler = (request: RequestInfo, body: Buffer | undefined, sink: ResponseSink) => void | Promise<void>;

export interface StreamRouteOptions {
  /** Read the body (up to this many bytes) before calling the handler; omitted for GET routes. */
  maxBodyBytes?: number;
  log: Logger;
  /** How failures are answered: before the stream starts as a reply, after it as a last event. OpenAI's by default. */
  errors?: StreamErrors;
  /** Long-lived streams fanned out to many clients: no chunked encoding (see NodeResponseSink). */
  closeDelimited?: boolean;
  /** Lets the body in before it is read (the edge's key check and body budget); `keyed`: the route takes a key. */
  gate?: BodyGate;
  keyed?: boolean;
}

export interface StreamErrors {
  reply(error: unknown): { status: number; body: unknown; headers?: Record<string, string> };
  event(error: unknown): string;
}

const openAiErrors = (log: Logger): StreamErrors => ({ reply: (error) => openAiError(error, log), event: (error) => openAiErrorEvent(error, log) });


/**
 * The streaming counterpart of `http/route.ts`: same guarantees (body size enforced while reading, no
 * error escapes), but the handler owns the response through a sink so it can stream.
 * A failure before the first byte becomes an OpenAI error reply with its status; after the stream has
 * started the status is gone, so it becomes a final `data: {"error":…}` event and the stream closes.
 */
export function streamRoute(handler: StreamHandler, options: StreamRouteOptions): NodeHandler {
  return (req, res) => {
    const request = captureRequest(req);
    const sink = new NodeResponseSink(res, newRequestId(), options.closeDelimited ?? false);
    const errors = options.errors ?? openAiErrors(options.log);
    const fail = (error: unknown) => {
      if (!sink.open) return;
      if (sink.streaming) sink.end(errors.event(error));
      else {
        const answer = errors.reply(error);
        sink.reply(answer.status, "application/json", JSON.stringify(answer.body), answer.headers);
      }
    };
    const run = (body: Buffer | undefined) => {
      try {
        const done = handler(request, body, sink);
        if (done) done.catch(fail);
      } catch (error) {
        fail(error);
      }
    };
    if (options.maxBodyBytes === undefined) run(undefined);
    else
      // The rest of a refused body is dropped as it arrives (readGatedBody): the connection stays for the answer.
      readGatedBody(req, res, request, options.maxBodyBytes, options.keyed ?? false, options.gate).then(run, fail);
  };
}
