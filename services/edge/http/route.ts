import { captureRequest, readBody, type HeaderName, type RequestInfo } from "./request.ts";
import { writeReply, type HttpReply } from "./reply.ts";
import type { HttpRequest, HttpResponse } from "./uws.ts";

export type RouteHandler = (request: RequestInfo, body: Buffer | undefined) => HttpReply | Promise<HttpReply>;

export interface RouteOptions {
  /** Headers the handler reads (content-length is added when the body is read). */
  headers: readonly HeaderName[];
  /** Read the body (up to this many bytes) before calling the handler. */
  maxBodyBytes?: number;
  /** Maps anything a handler throws to the reply format of its API (envelope or OpenAI error). */
  replyForError: (error: unknown) => HttpReply;
}

const isPromise = (value: HttpReply | Promise<HttpReply>): value is Promise<HttpReply> =>
  typeof (value as Promise<HttpReply>).then === "function";

/**
 * Adapts a handler to uWS: registers onAborted before anything async, reads the body when asked,
 * writes the reply corked, and never lets an error escape (an unanswered uWS request aborts the process).
 */
export function route(handler: RouteHandler, options: RouteOptions) {
  const headerNames: readonly HeaderName[] =
    options.maxBodyBytes === undefined ? options.headers : [...options.headers, "content-length"];
  return (res: HttpResponse, req: HttpRequest): void => {
    const request = captureRequest(req, headerNames);
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const finish = (reply: HttpReply, closeConnection = false) => {
      if (!aborted) res.cork(() => writeReply(res, reply, closeConnection));
    };
    const fail = (error: unknown, closeConnection = false) => finish(options.replyForError(error), closeConnection);
    const run = (body: Buffer | undefined) => {
      try {
        const reply = handler(request, body);
        if (isPromise(reply)) reply.then((r) => finish(r), (e: unknown) => fail(e));
        else finish(reply);
      } catch (error) {
        fail(error);
      }
    };
    if (options.maxBodyBytes === undefined) run(undefined);
    // A refused body may still be arriving: close the connection rather than read the rest.
    else readBody(res, request, options.maxBodyBytes).then(run, (e: unknown) => fail(e, true));
  };
}
