import { DeliverPolicy, type JetStreamClient } from "@nats-io/jetstream";
import { LRUCache } from "lru-cache";
import { TaskEvent, type TaskView } from "../../../contracts/videoTask.ts";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";
import type { Logger } from "../../shared/log.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { applyForStatus, type StatusChange } from "../../tasks/statusChanges.ts";
import { evolveTaskView } from "../../tasks/taskView.ts";

export type StatusListener = (change: StatusChange) => void;

/** How the upstream answered a task's submit, as its log tells. */
export type SubmissionOutcome = { outcome: "accepted"; providerTaskId: string } | { outcome: "rejected"; reason: string } | { outcome: "ended" };

/** Views the hub keeps to turn the next event of a task into a status change without reading its log. */
const VIEWS_KEPT = 50_000;

/**
 * One subscription per edge to the whole task log (an ordered consumer: nothing stored on the server),
 * turned into status changes once and fanned out in memory to every open event stream of the task or of
 * its account. Ten thousand streams cost ten thousand listeners, not ten thousand NATS consumers.
 */
export class TaskEventHub {
  private readonly views = new LRUCache<number, TaskView>({ max: VIEWS_KEPT });
  private readonly byTask = new Map<number, Set<StatusListener>>();
  private readonly byAccount = new Map<string, Set<StatusListener>>();
  /** Creates on this edge waiting to hear the upstream's answer, by task id. */
  private readonly submissions = new Map<number, (outcome: SubmissionOutcome) => void>();
  private stopFeed: (() => void) | undefined;
  /** Stream sequence of the last event processed. */
  position = 0;

  constructor(
    private readonly js: JetStreamClient,
    private readonly taskLog: TaskLog,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    const consumer = await this.js.consumers.get(STREAMS.tasks.name, { filter_subjects: STREAMS.tasks.subjects[0], deliver_policy: DeliverPolicy.New });
    const messages = await consumer.consume();
    this.stopFeed = () => void messages.stop();
    void (async () => {
      for await (const msg of messages) {
        const parsed = TaskEvent.safeParse(msg.json());
        if (parsed.success && this.submissions.size > 0) this.answerSubmission(parsed.data);
        if (parsed.success) await this.process(parsed.data, msg.seq).catch((error: unknown) => this.log.warn({ err: error, seq: msg.seq }, "task event not turned into a status change"));
        this.position = msg.seq;
      }
    })();
  }

  stop(): void {
    this.stopFeed?.();
  }

  /**
   * The upstream's answer to task N's submit, from the first event after TaskSubmitted that tells it;
   * undefined when none came within `waitMs`. Call before the task's first event is written.
   */
  async submissionOutcome(taskId: number, waitMs: number, written: Promise<unknown>): Promise<SubmissionOutcome | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const outcome = new Promise<SubmissionOutcome | undefined>((resolve) => {
      this.submissions.set(taskId, resolve);
      timer = setTimeout(() => resolve(undefined), waitMs);
    });
    try {
      await written;
      return await outcome;
    } finally {
      clearTimeout(timer);
      this.submissions.delete(taskId);
    }
  }

  subscribeTask(taskId: number, listener: StatusListener): () => void {
    return subscribe(this.byTask, taskId, listener);
  }

  subscribeAccount(account: string, listener: StatusListener): () => void {
    return subscribe(this.byAccount, account, listener);
  }

  /** Open streams, for metrics. */
  get listeners(): number {
    let count = 0;
    for (const set of this.byTask.values()) count += set.size;
    for (const set of this.byAccount.values()) count += set.size;
    return count;
  }

  private async process(event: TaskEvent, sequence: number): Promise<void> {
    const { taskId, version } = event.meta;
    if (!this.byTask.has(taskId) && !(this.byAccount.size > 0)) {
      // Nobody follows it: keep its view current only when that costs nothing (never read a log for it).
      const known = event.type === "TaskSubmitted" ? null : this.views.get(taskId);
      const view = known === undefined || (known !== null && known.version !== version - 1) ? null : evolveTaskView(known, event);
      if (view) this.views.set(taskId, view);
      else this.views.delete(taskId);
      return;
    }
    const before = await this.viewBefore(event);
    const { view, change } = applyForStatus(before, event, sequence);
    if (view) this.views.set(taskId, view);
    if (!change) return;
    for (const listener of this.byTask.get(taskId) ?? []) listener(change);
    for (const listener of this.byAccount.get(change.account) ?? []) listener(change);
  }

  private answerSubmission(event: TaskEvent): void {
    const answer = this.submissions.get(event.meta.taskId);
    if (!answer || event.type === "TaskSubmitted") return;
    if (event.type === "UpstreamAccepted") answer({ outcome: "accepted", providerTaskId: event.data.providerTaskId });
    else if (event.type === "GenerationFailed" && event.data.stage === "submit") answer({ outcome: "rejected", reason: event.data.reason });
    // Anything else (the deadline, a deletion) ends the wait: the task is answered as it stands.
    else answer({ outcome: "ended" });
  }

  /** The task's view just before `event`: kept in memory, or folded from its log. */
  private async viewBefore(event: TaskEvent): Promise<TaskView | null> {
    if (event.type === "TaskSubmitted") return null;
    const known = this.views.get(event.meta.taskId);
    if (known && known.version === event.meta.version - 1) return known;
    let view: TaskView | null = null;
    for (const { event: earlier } of await this.taskLog.history(event.meta.taskId)) {
      if (earlier.meta.version < event.meta.version) view = evolveTaskView(view, earlier);
    }
    return view;
  }
}

function subscribe<K>(map: Map<K, Set<StatusListener>>, key: K, listener: StatusListener): () => void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && map.get(key) === set) map.delete(key);
  };
}
