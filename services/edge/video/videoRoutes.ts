import type { JetStreamManager } from "@nats-io/jetstream";
import type { ReelayConfig } from "../../../contracts/config.ts";
import { VIDEO_API, type TaskListAnswer } from "../../../contracts/videoApi.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import type { z } from "zod";
import { NotFoundError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { taskDataObject } from "../../tasks/taskData.ts";
import { listAccountTasks } from "../../tasks/taskIndex.ts";
import type { ApiKeyDirectory } from "../auth.ts";
import { jsonReply } from "../http/reply.ts";
import { parseJsonBody, type RequestInfo } from "../http/request.ts";
import { replyRoute, type TableRoute } from "../http/routeTable.ts";
import { normalizeVideoRequest } from "./normalizeRequest.ts";
import { usableProviders } from "./videoModelAvailability.ts";
import { createReply, QueryReplyCache } from "./taskReplies.ts";
import { createVideoTask, type CreateDeps } from "./createTask.ts";
import { validateIdempotencyKey } from "./idempotencyKeys.ts";

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

/** The spec's create, query and task list (contracts/videoApi.ts). */
export function videoRoutes(deps: VideoRouteDeps): TableRoute[] {
  const usable = usableProviders(deps.config, process.env, deps.log);
  const replies = new QueryReplyCache();
  const { baseUrl } = deps;

  const create = replyRoute(
    VIDEO_API.create,
    ({ request, body }) => {
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
    { maxBodyBytes: deps.config.limits.maxBodyBytes },
  );

  // The caller's tasks, newest first (also how a client whose create answer was lost finds its task).
  const list = replyRoute(VIDEO_API.list, (call) =>
    deps.keys.withAccount(call.request.header("authorization"), async (key) => {
      const { status, ...page } = call.query;
      const matches = status === undefined ? {} : { matches: (view: TaskView) => view.status === status };
      const { views, more } = await listAccountTasks(deps.jsm, key.account, { ...page, ...matches }, (id) => deps.views.get(key.account, id));
      const tasks = views.map((view) => taskDataObject(view, baseUrl(call.request)));
      const answer: z.input<typeof TaskListAnswer> = { code: 200, msg: "success", data: { tasks, next_before: more ? (views.at(-1)?.taskId ?? null) : null } };
      return jsonReply(200, answer);
    }),
  );

  const query = replyRoute(VIDEO_API.query, (call) =>
    deps.keys.withAccount(call.request.header("authorization"), (key) => {
      const { id } = call.query;
      const view = deps.views.get(key.account, id);
      // Inline callbacks, no named closure per query (under tsx each costs a defineProperty).
      return view instanceof Promise
        ? view.then((settled) => replies.reply(ownedView(settled, key.account, id), baseUrl(call.request)))
        : replies.reply(ownedView(view, key.account, id), baseUrl(call.request));
    }),
  );
  return [...create, ...list, ...query];
}

/** Another account's task answers exactly like a missing one: ids are guessable. */
function ownedView(view: TaskView | undefined, account: string, id: number): TaskView {
  if (!view || view.account !== account) throw new NotFoundError(`task ${id} does not exist`);
  return view;
}
