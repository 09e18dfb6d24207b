import type { ReelayConfig } from "../../../contracts/config.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { NotFoundError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import type { ApiKeyDirectory } from "../auth.ts";
import { parseJsonBody, type RequestInfo } from "../http/request.ts";
import { route } from "../http/route.ts";
import type { TemplatedApp } from "../http/uws.ts";
import { videoErrorReply } from "../http/videoErrors.ts";
import { normalizeVideoRequest } from "./normalizeRequest.ts";
import { createReply, QueryReplyCache } from "./taskReplies.ts";
import { createVideoTask, type CreateDeps } from "./createVideoTask.ts";
import { IdempotencyKeys } from "./idempotencyKeys.ts";
import { parseTaskIdParam } from "./taskIdParam.ts";
import type { TaskViewReader } from "./taskViewReader.ts";
import { contextFromTraceparent, inSpan, SpanKind } from "../../shared/tracing/tracing.ts";

export interface VideoRouteDeps {
  config: ReelayConfig;
  keys: ApiKeyDirectory;
  create: CreateDeps;
  views: TaskViewReader;
  /** REELAY_PUBLIC_URL; otherwise video addresses are built from the request's Host header. */
  publicUrl: string | undefined;
  log: Logger;
}


/** Where video addresses point: REELAY_PUBLIC_URL, else the address the client used. */
export const videoBaseUrl =
  (publicUrl: string | undefined) =>
  (request: RequestInfo): string =>
    publicUrl ?? `${request.header("x-forwarded-proto") || "http"}://${request.header("host") || "localhost"}`;

export function registerVideoRoutes(app: TemplatedApp, deps: VideoRouteDeps): void {
  const replyForError = videoErrorReply(deps.log);
  const replies = new QueryReplyCache();
  const baseUrl = videoBaseUrl(deps.publicUrl);

  app.post(
    "/api/compat/videosGenerations",
    route(
      (request, body) => {
        // The create's span continues the client's trace (W3C traceparent) and rides on the job to the runner.
        const parent = contextFromTraceparent(request.header("traceparent"), request.header("tracestate"));
        return inSpan("POST /api/compat/videosGenerations", { kind: SpanKind.SERVER, parent }, async () =>
          deps.keys.withAccount(request.header("authorization"), async (key) => {
            const normalized = normalizeVideoRequest(parseJsonBody(body ?? Buffer.alloc(0)), deps.config);
            const idempotencyKey = request.header("idempotency-key") || undefined;
            const task = await createVideoTask(
              deps.create,
              key.account,
              normalized,
              idempotencyKey === undefined ? undefined : IdempotencyKeys.validate(idempotencyKey),
            );
            return createReply(task);
          }),
        );
      },
      { headers: ["authorization", "idempotency-key", "host", "x-forwarded-proto", "traceparent", "tracestate"], maxBodyBytes: deps.config.limits.maxBodyBytes, replyForError },
    ),
  );

  app.get(
    "/api/compat/videosTask",
    route(
      (request) =>
        deps.keys.withAccount(request.header("authorization"), (key) => {
          const id = parseTaskIdParam(request.query);
          const answer = (view: TaskView | undefined) => {
            // Another account's task answers exactly like a missing one: ids are guessable.
            if (!view || view.account !== key.account) throw new NotFoundError(`task ${id} does not exist`);
            return replies.reply(view, baseUrl(request));
          };
          const view = deps.views.get(id);
          return view instanceof Promise ? view.then(answer) : answer(view);
        }),
      { headers: ["authorization", "host", "x-forwarded-proto"], replyForError },
    ),
  );
}
