import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { accountOfSubject, accountTaskSubjects, TASK_LOG_SUBJECTS, TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { taskMessageBody } from "../shared/taskLog.ts";

/** One task event as subscribers get it: validated, with its stream sequence (the resume point) and account. */
export interface TaskEventRecord {
  sequence: number;
  account: string;
  event: TaskEvent;
}

export interface TaskEventSubscription {
  /** Stream sequence to start at (inclusive); "new": only events appended from now on. Default: from the start. */
  from?: number | "new";
  /** Only this account's tasks. */
  account?: string;
  /** Only these event types. */
  types?: ReadonlyArray<TaskEvent["type"]>;
  /** Ends the iteration. */
  signal?: AbortSignal;
}

/**
 * The task log as an async iterator, for Node services that follow tasks (billing exports, notifications,
 * analytics): an ordered consumer of stream EVENTS (the task subjects under `acct.<account>.`, only one
 * account's with `account`), nothing stored on the server, resumable from any sequence. Events that fail validation are skipped (the task-view projection
 * parks them in DEAD_LETTERS for operators).
 *
 * ```ts
 * for await (const { sequence, account, event } of subscribeTaskEvents(nats, { from: "new", types: ["GenerationSucceeded"] })) …
 * ```
 */
export async function* subscribeTaskEvents(
  nats: { js: JetStreamClient; jsm: JetStreamManager },
  options: TaskEventSubscription = {},
): AsyncGenerator<TaskEventRecord> {
  const start =
    options.from === "new"
      ? { deliver_policy: DeliverPolicy.New }
      : options.from === undefined
        ? { deliver_policy: DeliverPolicy.All }
        : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: options.from };
  const subjects = options.account === undefined ? [...TASK_LOG_SUBJECTS] : accountTaskSubjects(options.account);
  const consumer = await nats.js.consumers.get(STREAMS.events.name, { filter_subjects: subjects, ...start });
  const messages = await consumer.consume();
  const stop = () => void messages.stop();
  options.signal?.addEventListener("abort", stop, { once: true });
  try {
    for await (const msg of messages) {
      const parsed = TaskEvent.safeParse(taskMessageBody(msg.json()));
      if (!parsed.success) continue;
      const event = parsed.data;
      if (options.types && !options.types.includes(event.type)) continue;
      yield { sequence: msg.seq, account: accountOfSubject(msg.subject), event };
    }
  } finally {
    options.signal?.removeEventListener("abort", stop);
    stop();
  }
}
