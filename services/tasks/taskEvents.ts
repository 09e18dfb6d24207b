import { DeliverPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { pino } from "pino";
import { accountOfSubject, accountTaskSubjects, TASK_LOG_SUBJECTS, TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { OrderedFeed } from "../shared/liveFeed.ts";
import type { Logger } from "../shared/log.ts";
import { taskMessageBody } from "../shared/taskLog.ts";

const SILENT = pino({ level: "silent" });

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
  /** Where a lost and replaced consumer is told (nowhere by default). */
  log?: Logger;
  /** Called once the feed is open: a loss from then on is recovered from, one before it ends the iteration. */
  opened?: () => void;
}

/**
 * The task log as an async iterator, for Node services that follow tasks (billing exports, notifications,
 * analytics): an ordered consumer of stream EVENTS (the task subjects under `acct.<account>.`, only one
 * account's with `account`), nothing stored on the server, resumable from any sequence. It is a live feed
 * (`services/shared/liveFeed.ts`): a consumer lost under it (its node gone, deleted) is replaced within 2 s,
 * after the last event handed out. Events that fail validation are skipped (the task-view projection parks
 * them in DEAD_LETTERS for operators).
 *
 * ```ts
 * for await (const { sequence, account, event } of subscribeTaskEvents(nats, { from: "new", types: ["GenerationSucceeded"] })) …
 * ```
 */
export async function* subscribeTaskEvents(
  nats: { js: JetStreamClient; jsm: JetStreamManager },
  options: TaskEventSubscription = {},
): AsyncGenerator<TaskEventRecord> {
  const from =
    options.from === "new"
      ? (await nats.jsm.streams.info(STREAMS.events.name)).state.last_seq
      : Math.max(0, (options.from ?? 1) - 1);
  const subjects = options.account === undefined ? [...TASK_LOG_SUBJECTS] : accountTaskSubjects(options.account);
  // The feed hands one message at a time and waits until the reader asks for the next: no buffer grows.
  let handed: { msg: JsMsg; taken: () => void } | undefined;
  let wake: (() => void) | undefined;
  const feed = new OrderedFeed({
    what: "task events",
    log: options.log ?? SILENT,
    from,
    open: (position) => nats.js.consumers.get(STREAMS.events.name, { filter_subjects: subjects, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: position + 1 }),
    take: (msg) =>
      new Promise<void>((taken) => {
        handed = { msg, taken };
        wake?.();
      }),
  });
  await feed.start();
  options.opened?.();
  const stop = () => {
    feed.stop();
    wake?.();
  };
  options.signal?.addEventListener("abort", stop, { once: true });
  try {
    while (!options.signal?.aborted) {
      const next = handed;
      if (!next) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      const { msg } = next;
      const parsed = TaskEvent.safeParse(taskMessageBody(msg.json()));
      if (parsed.success && (!options.types || options.types.includes(parsed.data.type))) {
        yield { sequence: msg.seq, account: accountOfSubject(msg.subject), event: parsed.data };
      }
      handed = undefined;
      next.taken();
    }
  } finally {
    options.signal?.removeEventListener("abort", stop);
    feed.stop();
    // Lets the stopped feed's loop end (it waits for the message it handed out last).
    handed?.taken();
  }
}
