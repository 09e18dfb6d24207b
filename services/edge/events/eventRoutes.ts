import type { JetStreamClient } from "@nats-io/jetstream";
import { LRUCache } from "lru-cache";
import type { Logger } from "../../shared/log.ts";
import type { StatusChange } from "../../tasks/statusChanges.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { taskDataObject } from "../../tasks/taskData.ts";
import type { ApiKeyDirectory } from "../auth.ts";
import { streamRoute, type StreamErrors } from "../chat/streamRoute.ts";
import type { RequestInfo } from "../http/request.ts";
import type { HttpApp } from "../http/httpApp.ts";
import { videoError } from "../http/videoErrors.ts";
import { parseTaskIdParam } from "../video/taskIdParam.ts";
import type { TaskViewReader } from "../video/taskViewReader.ts";
import { followAccount, followTask } from "./eventStreams.ts";
import { SseSession } from "./sseSession.ts";
import { StreamsPerAccount } from "./streamsPerAccount.ts";
import type { TaskEventHub } from "./taskEventHub.ts";

export interface EventRouteDeps {
  keys: ApiKeyDirectory;
  views: TaskViewReader;
  hub: TaskEventHub;
  taskLog: TaskLog;
  js: JetStreamClient;
  /** Where video addresses point (as the query endpoint builds them). */
  baseUrl: (request: RequestInfo) => string;
  log: Logger;
  keepaliveMs: number;
  /** Event streams one account may have open on this edge. */
  streamsPerAccount: number;
}

/** Frames a stream may leave unread before it is cut (the client resumes with Last-Event-ID). */
const MAX_UNREAD = 1000;

function lastEventIdOf(request: RequestInfo): number | undefined {
  const header = request.header("last-event-id");
  if (header === "") return undefined;
  if (!/^[1-9][0-9]{0,15}$/.test(header)) throw new ValidationError(`Last-Event-ID must be an event id this stream sent (a positive integer), got "${header.slice(0, 40)}"`);
  return Number(header);
}

/**
 * Live task events over SSE: `GET /api/compat/videosTask/events?id=<task_id>` (one task, ends after its
 * final state) and `GET /api/compat/videosTasks/events` (every task of the caller's account). Same key and
 * tenancy as the query; errors before the stream starts in the video envelope, after it as an `error` event.
 */
export function registerEventRoutes(app: HttpApp, deps: EventRouteDeps): void {
  // One change goes to every open stream of its task and account (thousands): its frame is built once per
  // video base URL, and the same bytes are written to every stream.
  const frames = new LRUCache<string, Buffer>({ max: 1000 });
  const frameOf = (change: StatusChange, base: string): Buffer => {
    const key = `${change.sequence}|${base}`;
    let frame = frames.get(key);
    if (frame === undefined) {
      frame = Buffer.from(`id: ${change.sequence}\nevent: status\ndata: ${JSON.stringify(taskDataObject(change.view, base))}\n\n`);
      frames.set(key, frame);
    }
    return frame;
  };
  const errors: StreamErrors = {
    reply: (error) => videoError(error, deps.log),
    event: (error) => `event: error\ndata: ${JSON.stringify(videoError(error, deps.log).body)}\n\n`,
  };
  const streams = new StreamsPerAccount(deps.streamsPerAccount);
  const session = (sink: ConstructorParameters<typeof SseSession>[0], request: RequestInfo, account: string, lastEventId: number | undefined, endAfterFinal: boolean) => {
    const leave = streams.enter(account);
    const opened = new SseSession(
      sink,
      { keepaliveMs: deps.keepaliveMs, maxUnread: MAX_UNREAD, endAfterFinal, frameOf: (change) => frameOf(change, deps.baseUrl(request)) },
      lastEventId,
    );
    opened.onClose(leave);
    return opened;
  };

  app.get(
    "/api/compat/videosTask/events",
    streamRoute(
      async (request, _body, sink) => {
        const key = await deps.keys.authenticate(request.header("authorization"));
        const taskId = parseTaskIdParam(request.query);
        const view = await deps.views.get(key.account, taskId);
        // Another account's task answers exactly like a missing one: ids are guessable.
        if (!view) throw new NotFoundError(`task ${taskId} does not exist`);
        const lastEventId = lastEventIdOf(request);
        await followTask(deps.hub, deps.taskLog, session(sink, request, key.account, lastEventId, true), key.account, taskId, lastEventId);
      },
      { log: deps.log, errors, closeDelimited: true },
    ),
  );

  app.get(
    "/api/compat/videosTasks/events",
    streamRoute(
      async (request, _body, sink) => {
        const key = await deps.keys.authenticate(request.header("authorization"));
        const lastEventId = lastEventIdOf(request);
        await followAccount(deps.hub, deps.js, deps.taskLog, session(sink, request, key.account, lastEventId, false), key.account, lastEventId);
      },
      { log: deps.log, errors, closeDelimited: true },
    ),
  );
}
