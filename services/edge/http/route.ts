import type { IncomingMessage, ServerResponse } from "node:http";
import { readGatedBody, type BodyGate } from "./bodyGate.ts";
import { captureRequest, type RequestInfo } from "./request.ts";
import { writeReply, type HttpReply } from "./reply.ts";
import { newRequestId } from "./requestId.ts";

export type RouteHandler = (request: RequestInfo, body: Buffer | undefined) => HttpReply | Promise<HttpReply>;
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface RouteOptions {
  /** Read the body (up to this many bytes) before calling the handler. */
  maxBodyBytes?: number;
  /** Maps anything a handler throws to the reply format of its API (envelope or OpenAI error). */
  replyForError: (error: unknown) => HttpReply;
  /** Lets the body in before it is read (the edge's key check and body budget); `keyed`: the route takes a key. */
  gate?: BodyGate;
  keyed?: boolean;
}

const isPromise = (value: HttpReply | Promise<HttpReply>): value is Promise<HttpReply> =>
  typeof (value as Promise<HttpReply>).then === "function";

/** Adapts a handler to node:http: reads the body when asked, writes the reply, never lets an error escape. */
export function route(handler: RouteHandler, options: RouteOptions): NodeHandler {
  // No named closures per request here: under tsx each costs a defineProperty (esbuild's keepNames).
  return (req, res) => {
    const request = captureRequest(req);
    // Like chat answers, every API answer names its request (support can find it in the log).
    res.setHeader("x-request-id", newRequestId());
    if (options.maxBodyBytes === undefined) runHandler(handler, options, request, undefined, res);
    else
      readGatedBody(req, res, request, options.maxBodyBytes, options.keyed ?? false, options.gate).then(
        (body) => runHandler(handler, options, request, body, res),
        (e: unknown) => {
          // The client left mid-body: nobody to answer, and nothing went wrong on our side worth a log line.
          if (res.destroyed) return;
          // The rest of a refused body is dropped as it arrives (readGatedBody): the connection stays for the answer.
          writeReply(res, options.replyForError(e));
        },
      );
  };
}

function runHandler(handler: RouteHandler, options: RouteOptions, request: RequestInfo, body: Buffer | undefined, res: ServerResponse): void {
  try {
    const reply = handler(request, body);
    if (isPromise(reply))
      reply.then(
        (r) => writeReply(res, r, false),
        (e: unknown) => writeReply(res, options.replyForError(e), false),
      );
    else writeReply(res, reply, false);
  } catch (error) {
    writeReply(res, options.replyForError(error), false);
  }
}
