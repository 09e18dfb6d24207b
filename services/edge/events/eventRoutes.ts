import type { JetStreamClient } from "@nats-io/jetstream";
import { lruOf } from "../../shared/lruOf.ts";
import type { Logger } from "../../shared/log.ts";
import type { StatusChange } from "../../tasks/statusChanges.ts";
import { EventStreamHeaders, VIDEO_API } from "../../../contracts/videoApi.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { taskDataObject } from "../../tasks/taskData.ts";
import type { ApiKeyDirectory } from "../auth.ts";
import type { RequestInfo } from "../http/request.ts";
import { sinkRoute, type TableRoute } from "../http/routeTable.ts";
import type { TaskViewReader } from "../video/taskViewReader.ts";
import { followAccount, followTask } from "./eventStreams.ts";
import { SseSession } from "./sseSession.ts";
import { InFlightPerAccount } from "../inFlightPerAccount.ts";
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
  const parsed = EventStreamHeaders.shape["last-event-id"].safeParse(header);
  if (!parsed.success) throw new ValidationError(parsed.error.issues[0]?.message ?? "bad Last-Event-ID");
  return parsed.data;
}

/** A follow that fails (its history could not be read) lets its session go; the route answers its error. */
async function releasedOnFailure(session: SseSession, following: Promise<void>): Promise<void> {
  try {
    await following;
  } catch (error) {
    session.release();
    throw error;
  }
}

/**
 * Live task events over SSE: `GET /api/compat/videosTask/events?id=<task_id>` (one task, ends after its
 * final state) and `GET /api/compat/videosTasks/events` (every task of the caller's account). Same key and
 * tenancy as the query; errors before the stream starts in the video envelope, after it as an `error` event.
 */
export function eventRoutes(deps: EventRouteDeps): TableRoute[] {
  // One change goes to every open stream of its task and account (thousands): its frame is built once per
  // video base URL, and the same bytes are written to every stream.
  const frames = lruOf<string, Buffer>(1000);
  const frameOf = (change: StatusChange, base: string): Buffer => {
    const key = `${change.sequence}|${base}`;
    let frame = frames.get(key);
    if (frame === undefined) {
      frame = Buffer.from(`id: ${change.sequence}\nevent: status\ndata: ${JSON.stringify(taskDataObject(change.view, base))}\n\n`);
      frames.set(key, frame);
    }
    return frame;
  };
  const streams = new InFlightPerAccount(
    deps.streamsPerAccount,
    (limit) => `too many event streams open for this account (at most ${limit} per edge): close one, or follow the whole account with /api/compat/videosTasks/events`,
  );
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

  return [
    ...sinkRoute(
      VIDEO_API.taskEvents,
      async (call, sink) => {
        const { request } = call;
        const key = await deps.keys.authenticate(request.header("authorization"));
        // Read (and so parsed) after the key: a request without one is a 401 whatever its query.
        const taskId = call.query.id;
        const view = await deps.views.get(key.account, taskId);
        // Another account's task answers exactly like a missing one: ids are guessable.
        if (!view) throw new NotFoundError(`task ${taskId} does not exist`);
        const lastEventId = lastEventIdOf(request);
        const opened = session(sink, request, key.account, lastEventId, true);
        await releasedOnFailure(opened, followTask(deps.hub, deps.taskLog, opened, key.account, taskId, lastEventId));
      },
      { closeDelimited: true },
    ),
    ...sinkRoute(
      VIDEO_API.accountEvents,
      async ({ request }, sink) => {
        const key = await deps.keys.authenticate(request.header("authorization"));
        const lastEventId = lastEventIdOf(request);
        const opened = session(sink, request, key.account, lastEventId, false);
        await releasedOnFailure(opened, followAccount(deps.hub, deps.js, deps.taskLog, opened, key.account, lastEventId));
      },
      { closeDelimited: true },
    ),
  ];
}
