import { DeliverPolicy, type Consumer, type JetStreamClient } from "@nats-io/jetstream";
import { accountTaskSubjects, TaskEvent, type TaskView } from "../../../contracts/videoTask.ts";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";
import { taskMessageBody, type TaskLog } from "../../shared/taskLog.ts";
import { applyForStatus, type StatusChange } from "../../tasks/statusChanges.ts";
import { evolveTaskView } from "../../tasks/taskView.ts";
import type { TaskEventHub } from "./taskEventHub.ts";
import type { SseSession } from "./sseSession.ts";

/**
 * Follows one task: its current state first (or, resuming after `lastEventId`, every change since), then
 * each change as it happens, until a final one. Live changes are held back while the history is read and
 * sent after it, so nothing is missed or sent twice.
 */
export async function followTask(
  hub: TaskEventHub,
  taskLog: TaskLog,
  session: SseSession,
  account: string,
  taskId: number,
  lastEventId: number | undefined,
): Promise<void> {
  const held: StatusChange[] = [];
  let live = false;
  session.onClose(hub.subscribeTask(taskId, (change) => (live ? session.emit(change) : held.push(change))));
  let view: TaskView | null = null;
  let lastSequence = 0;
  const missed: StatusChange[] = [];
  for (const { event, sequence } of await taskLog.history(account, taskId)) {
    const applied = applyForStatus(view, event, sequence);
    view = applied.view;
    lastSequence = sequence;
    if (lastEventId !== undefined && applied.change && sequence > lastEventId) missed.push(applied.change);
  }
  const final = view?.status === "success" || view?.status === "failed";
  if (lastEventId !== undefined && final && missed.length === 0) {
    // A client reconnecting after the final event: 204 is how a server tells EventSource to stop.
    session.finish();
    return;
  }
  session.begin();
  if (lastEventId === undefined && view) session.emit({ sequence: lastSequence, taskId, account: view.account, view, final });
  for (const change of missed) session.emit(change);
  for (const change of held) session.emit(change);
  live = true;
}

/**
 * Follows every task of an account: resuming after `lastEventId`, the changes since are read from the
 * account's own task subjects first (other accounts' events are never read); then live ones.
 */
export async function followAccount(
  hub: TaskEventHub,
  js: JetStreamClient,
  taskLog: TaskLog,
  session: SseSession,
  account: string,
  lastEventId: number | undefined,
): Promise<void> {
  const held: StatusChange[] = [];
  let live = false;
  session.onClose(hub.subscribeAccount(account, (change) => (live ? session.emit(change) : held.push(change))));
  session.begin();
  if (lastEventId !== undefined) await catchUp(js, taskLog, session, account, lastEventId, hub.position);
  for (const change of held) session.emit(change);
  live = true;
}

async function catchUp(js: JetStreamClient, taskLog: TaskLog, session: SseSession, account: string, after: number, until: number): Promise<void> {
  if (until <= after) return;
  const consumer = await js.consumers.get(STREAMS.events.name, {
    filter_subjects: accountTaskSubjects(account),
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: after + 1,
  });
  try {
    // None of the account's events came since: what comes next is live. Reading on would wait for the account's
    // next event, for good if it never came (an idle account, whose `until` other tenants' events had moved on),
    // with a consumer on the server for each such resume, however soon its client hung up.
    if ((await consumer.info(true)).num_pending === 0) return;
    await readChanges(consumer, taskLog, session, account, until);
  } finally {
    // nats-server keeps an ordered consumer for 5 minutes after its last pull (nats.js's inactive threshold):
    // each resume left one behind.
    void consumer.delete().catch(() => undefined);
  }
}

async function readChanges(consumer: Consumer, taskLog: TaskLog, session: SseSession, account: string, until: number): Promise<void> {
  const views = new Map<number, TaskView | null>();
  const messages = await consumer.consume();
  // A client that leaves mid-read ends the read at once, not at the account's next event.
  session.onClose(() => messages.stop());
  for await (const msg of messages) {
    if (!session.open) break;
    const parsed = TaskEvent.safeParse(taskMessageBody(msg.json()));
    if (parsed.success) {
      const event = parsed.data;
      const { taskId, version } = event.meta;
      let before = views.get(taskId);
      if (before === undefined && event.type !== "TaskSubmitted") {
        // First met mid-history: its view just before this event, from its log.
        before = null;
        for (const { event: earlier } of await taskLog.history(account, taskId)) if (earlier.meta.version < version) before = evolveTaskView(before, earlier);
      }
      const { view, change } = applyForStatus(before ?? null, event, msg.seq);
      views.set(taskId, view);
      if (change && change.account === account) session.emit(change);
    }
    if (msg.seq >= until || msg.info.pending === 0) break;
  }
  // stop(), not close(): close() waits for the server to confirm, which never comes once we broke out.
  messages.stop();
}
