import { JetStreamApiCodes, JetStreamApiError, type JsMsg } from "@nats-io/jetstream";
import { SubmitVideoTask, type TaskSubmittedEvent } from "../../contracts/videoTask.ts";
import { LEGACY_WORK } from "../../infra/jetstreamLayout.ts";
import { firstTaskEvent } from "../../machines/videoTaskDecider.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { pullLoop } from "../shared/pullLoop.ts";
import type { TaskLog } from "../shared/taskLog.ts";

/**
 * Runs the jobs an older reelay queued on WORK (before edges wrote each task's first event themselves), so
 * an upgrade loses none. Only on a store that has the WORK stream; it stays idle once that is empty.
 *
 * - A job whose task has no first event yet gets it now, written as the edge writes it, and is acked:
 *   runners then take the task from the task log like any new one.
 * - A job whose task is already under way (its old runner wrote the first event) is hosted from WORK
 *   until the task is final, as a redelivery: the upstream is asked before anything is submitted again.
 */
export async function drainLegacyWorkQueue(
  nats: Nats,
  taskLog: TaskLog,
  options: {
    signal: AbortSignal;
    room: () => number;
    maxTaskMs: number;
    host: (msg: JsMsg, submitted: TaskSubmittedEvent) => void;
    log: Logger;
  },
): Promise<void> {
  const consumer = await nats.js.consumers.get(LEGACY_WORK.stream, LEGACY_WORK.durable).catch((error: unknown) => {
    if (error instanceof JetStreamApiError && (error.code === JetStreamApiCodes.StreamNotFound || error.code === JetStreamApiCodes.ConsumerNotFound)) return undefined;
    throw error;
  });
  if (!consumer) return;
  const log = options.log.child({ part: "legacy work queue" });
  log.info("this store has a WORK queue from an older reelay: running what is left on it");
  await pullLoop(consumer, {
    signal: options.signal,
    room: options.room,
    take: (msg) => void take(msg).catch((error: unknown) => {
      log.warn({ err: error, seq: msg.seq }, "legacy job not taken over; it is handed out again shortly");
      msg.nak(1000);
    }),
    log,
    what: "legacy work queue",
  });

  async function take(msg: JsMsg): Promise<void> {
    const parsed = SubmitVideoTask.safeParse(msg.json());
    if (!parsed.success) {
      log.error({ seq: msg.seq, issues: parsed.error.issues }, "unreadable legacy work item; dropping it");
      msg.term("unreadable work item");
      return;
    }
    const job = parsed.data;
    const first = await taskLog.first(job.taskId);
    if (first?.type === "TaskSubmitted") return options.host(msg, first);
    const event = firstTaskEvent({
      taskId: job.taskId,
      account: job.account,
      job: job.job,
      ignoredFields: job.ignoredFields,
      deadlineAt: new Date(Date.parse(job.receivedAt) + options.maxTaskMs).toISOString(),
      ...(job.callbackUrl ? { callbackUrl: job.callbackUrl } : {}),
    });
    await taskLog.appendFirst(job.taskId, event).catch((error: unknown) => {
      // Written meanwhile (a retry of this very step): the task is on the log either way.
      if (!(error instanceof ConcurrencyError)) throw error;
    });
    msg.ack();
  }
}
