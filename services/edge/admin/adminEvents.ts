import { DeliverPolicy } from "@nats-io/jetstream";
import { MONEY_EVENTS, ledgerEventsOf } from "../../../contracts/ledger.ts";
import { TASK_LOG_SUBJECTS } from "../../../contracts/videoTask.ts";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";
import type { AdminTokenStore } from "../../shared/adminTokens.ts";
import { FeedLiveness, LIVE_PULL, watchPull } from "../../shared/liveFeed.ts";
import type { Logger } from "../../shared/log.ts";
import type { Nats } from "../../shared/nats.ts";
import { taskEventCodec } from "../../shared/taskLog.ts";
import { streamRoute } from "../chat/streamRoute.ts";
import type { HttpApp } from "../http/httpApp.ts";
import { ADMIN_BASE, authenticateAdmin } from "./adminApi.ts";
import { adminError } from "./adminErrors.ts";

/** A console that stops reading is cut off after this many unsent bytes (it reconnects), never buffered for. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

/**
 * `GET /admin/v1/events`: every task event and every ledger event from now on, as Server-Sent Events
 * (`event: task` / `event: ledger`, `data:` the event as stored; a ledger message holding a group of events is
 * sent as one frame per event), for the console's live views. Two ordered
 * consumers from "new"; nothing is kept per stream beyond what the socket has not sent yet, within a bound.
 */
export function registerAdminEvents(app: HttpApp, deps: { nats: Nats; tokens: AdminTokenStore; log: Logger; keepaliveMs: number }): void {
  app.get(
    `${ADMIN_BASE}/events`,
    streamRoute(
      async (request, _body, sink) => {
        await authenticateAdmin(deps.tokens, request.header("authorization"));
        sink.write("retry: 2000\n\n");
        const keepalive = setInterval(() => sink.write(": keepalive\n\n"), deps.keepaliveMs);
        // Whatever ends the stream (the console leaving, a feed lost, one that was too slow, a follow that threw)
        // stops everything of it, and what starts after that is stopped at once: a stop that came too late to
        // be run, or not run on an end the sink did not report, kept its timer or its consumer.
        let stopped = false;
        const stops: Array<() => void> = [];
        const onStop = (stop: () => void) => (stopped ? stop() : void stops.push(stop));
        const stopAll = () => {
          stopped = true;
          for (const stop of stops.splice(0)) stop();
        };
        onStop(() => clearInterval(keepalive));
        sink.onAbort(stopAll);
        // Bytes written since the socket last said it was full: a console that stops reading is cut off.
        let unsent = 0;
        const follow = async (subjects: string[], kind: "task" | "ledger") => {
          const consumer = await deps.nats.js.consumers.get(STREAMS.events.name, { filter_subjects: subjects, deliver_policy: DeliverPolicy.New });
          // nats-server keeps an ordered consumer 5 minutes after its last pull (nats.js's inactive threshold).
          onStop(() => void consumer.delete().catch(() => undefined));
          const messages = await consumer.consume(LIVE_PULL);
          onStop(() => void messages.stop());
          // A consumer lost under the stream (its node gone) ends it within 1.5 s: the console reconnects
          // (`retry: 2000`) and follows from then on, instead of showing nothing more while looking live.
          watchPull(messages, new FeedLiveness(), () => {
            stopAll();
            if (sink.open) sink.end();
          });
          for await (const msg of messages) {
            if (!sink.open) break;
            const frame = framesOf(kind, msg.json());
            if (!sink.write(frame) || unsent > 0) {
              if (unsent === 0) sink.onDrain(() => (unsent = 0));
              unsent += frame.length;
            }
            if (unsent > MAX_BUFFERED_BYTES) {
              sink.end();
              break;
            }
          }
          // One feed's end ends the stream, and so the other feed.
          stopAll();
        };
        try {
          await Promise.all([follow([...TASK_LOG_SUBJECTS], "task"), follow([MONEY_EVENTS], "ledger")]);
        } finally {
          stopAll();
        }
      },
      {
        log: deps.log,
        closeDelimited: true,
        errors: {
          reply: (error) => adminError(error, deps.log),
          event: (error) => `event: error\ndata: ${JSON.stringify(adminError(error, deps.log).body)}\n\n`,
        },
      },
    ),
  );
}

/**
 * The SSE frames of one stored message: one per event. A ledger group commit holds several; a task's opening
 * is a task frame (its first event) and a ledger frame (its reservation).
 */
function framesOf(kind: "task" | "ledger", stored: unknown): string {
  const frame = (event: unknown) => `event: ${kind}\ndata: ${JSON.stringify(event)}\n\n`;
  if (kind === "ledger") return ledgerEventsOf(stored).map(frame).join("");
  return taskEventCodec.decode(stored).map(frame).join("");
}
