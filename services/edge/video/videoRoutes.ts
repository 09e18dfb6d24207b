import type { JetStreamManager } from "@nats-io/jetstream";
import type { ReelayConfig } from "../../../contracts/config.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { NotFoundError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { taskDataObject } from "../../tasks/taskData.ts";
import { listAccountTasks } from "../../tasks/taskIndex.ts";
import type { ApiKeyDirectory } from "../auth.ts";
import { jsonReply } from "../http/reply.ts";
import { parseJsonBody, type RequestInfo } from "../http/request.ts";
import { route } from "../http/route.ts";
import type { HttpApp } from "../http/httpApp.ts";
import { videoErrorReply } from "../http/videoErrors.ts";
import { normalizeVideoRequest } from "./normalizeRequest.ts";
import { usableProviders } from "./videoModelAvailability.ts";
import { createReply, QueryReplyCache } from "./taskReplies.ts";
import { createVideoTask, type CreateDeps } from "./createTask.ts";
import { validateIdempotencyKey } from "./idempotencyKeys.ts";
import { parseListQuery } from "./listQuery.ts";
import { parseTaskIdParam } from "./taskIdParam.ts";

import type { TaskViewReader } from "./taskViewReader.ts";
import { contextFromTraceparent, inSpan, SpanKind } from "../../shared/tracing/tracing.ts";

export interface VideoRouteDeps {
  config: ReelayConfig;
  keys: ApiKeyDirectory;
  create: CreateDeps;
  views: TaskViewReader;
  /** The account task index (services/tasks/taskIndex.ts) behind the task list. */
  jsm: JetStreamManager;
  /** Where video addresses point (http/videoBaseUrl.ts). */
  baseUrl: (request: RequestInfo) => string;
  log: Logger;
}


export function registerVideoRoutes(app: HttpApp, deps: VideoRouteDeps): void {
  const replyForError = videoErrorReply(deps.log);
  const usable = usableProviders(deps.config, process.env, deps.log);
  const replies = new QueryReplyCache();
  const { baseUrl } = deps;

  app.post(
    "/api/compat/videosGenerations",
    route(
      (request, body) => {
        // The create's span continues the client's trace (W3C traceparent) and rides on the job to the runner.
        const parent = contextFromTraceparent(request.header("traceparent"), request.header("tracestate"));
        return inSpan("POST /api/compat/videosGenerations", { kind: SpanKind.SERVER, parent }, async () =>
          deps.keys.withAccount(request.header("authorization"), async (key) => {
            const normalized = normalizeVideoRequest(parseJsonBody(body ?? Buffer.alloc(0)), deps.config, usable);
            const idempotencyKey = request.header("idempotency-key") || undefined;
            const task = await createVideoTask(
              deps.create,
              key.account,
              normalized,
              idempotencyKey === undefined ? undefined : validateIdempotencyKey(idempotencyKey),
            );
            return createReply(task);
          }),
        );
      },
      { maxBodyBytes: deps.config.limits.maxBodyBytes, replyForError },
    ),
  );

  // The caller's tasks, newest first (also how a client whose create answer was lost finds its task).
  app.get(
    "/api/compat/videosTasks",
    route(
      (request) =>
        deps.keys.withAccount(request.header("authorization"), async (key) => {
          const { status, ...page } = parseListQuery(request.query);
          const matches = status === undefined ? {} : { matches: (view: TaskView) => view.status === status };
          const { views, more } = await listAccountTasks(deps.jsm, key.account, { ...page, ...matches }, (id) => deps.views.get(key.account, id));
          const tasks = views.map((view) => taskDataObject(view, baseUrl(request)));
          return jsonReply(200, { code: 200, msg: "success", data: { tasks, next_before: more ? (views.at(-1)?.taskId ?? null) : null } });
        }),
      { replyForError },
    ),
  );

  app.get(
    "/api/compat/videosTask",
    route(
      (request) =>
        deps.keys.withAccount(request.header("authorization"), (key) => {
          const id = parseTaskIdParam(request.query);
          const view = deps.views.get(key.account, id);
          // Inline callbacks, no named closure per query (under tsx each costs a defineProperty).
          return view instanceof Promise
            ? view.then((settled) => replies.reply(ownedView(settled, key.account, id), baseUrl(request)))
            : replies.reply(ownedView(view, key.account, id), baseUrl(request));
        }),
      { replyForError },
    ),
  );
}

/** Another account's task answers exactly like a missing one: ids are guessable. */
function ownedView(view: TaskView | undefined, account: string, id: number): TaskView {
  if (!view || view.account !== account) throw new NotFoundError(`task ${id} does not exist`);
  return view;
}
