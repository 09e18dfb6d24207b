import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { TaskLog } from "../shared/taskLog.ts";
import { TaskDirectory } from "./taskDirectory.ts";

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
 * analytics): an ordered consumer of stream TASKS (subjects `tasks.<taskId>`), nothing stored on the
 * server, resumable from any sequence. Events that fail validation are skipped (the task-view projection
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
  const directory = new TaskDirectory(new TaskLog(nats.js, nats.jsm));
  const start =
    options.from === "new"
      ? { deliver_policy: DeliverPolicy.New }
      : options.from === undefined
        ? { deliver_policy: DeliverPolicy.All }
        : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: options.from };
  const consumer = await nats.js.consumers.get(STREAMS.tasks.name, { filter_subjects: STREAMS.tasks.subjects[0], ...start });
  const messages = await consumer.consume();
  const stop = () => void messages.stop();
  options.signal?.addEventListener("abort", stop, { once: true });
  try {
    for await (const msg of messages) {
      const parsed = TaskEvent.safeParse(msg.json());
      if (!parsed.success) continue;
      const event = parsed.data;
      directory.learn(event);
      if (options.types && !options.types.includes(event.type)) continue;
      const owner = await directory.ownerOf(event.meta.taskId);
      if (!owner || (options.account !== undefined && owner.account !== options.account)) continue;
      yield { sequence: msg.seq, account: owner.account, event };
    }
  } finally {
    options.signal?.removeEventListener("abort", stop);
    stop();
  }
}
