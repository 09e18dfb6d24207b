import { DeliverPolicy } from "@nats-io/jetstream";
import { accountOfSubject, TASK_LATER_EVENTS, TASK_LOG_SUBJECTS, TaskEvent, type TaskView } from "../../../contracts/videoTask.ts";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";
import { feedClient, OrderedFeed } from "../../shared/liveFeed.ts";
import type { Logger } from "../../shared/log.ts";
import type { Nats } from "../../shared/nats.ts";
import { taskMessageBody, type TaskLog } from "../../shared/taskLog.ts";
import { applyForStatus, type StatusChange } from "../../tasks/statusChanges.ts";
import { evolveTaskView } from "../../tasks/taskView.ts";

export type StatusListener = (change: StatusChange) => void;

/** How the upstream answered a task's submit, as its log tells. */
export type SubmissionOutcome = { outcome: "accepted"; providerTaskId: string } | { outcome: "rejected"; reason: string } | { outcome: "ended" };

/**
 * How long the feed keeps reading every task's opening after the last account event stream on this edge
 * closed: a client that reconnects, or opens its streams one after another, does not reopen the feed each time.
 */
export const OPENINGS_LINGER_MS = 30_000;

/**
 * One subscription per edge to the task log (an ordered consumer: nothing stored on the server), turned into
 * status changes once and fanned out in memory to every open event stream of the task or of its account. Ten
 * thousand streams cost ten thousand listeners, not ten thousand NATS consumers.
 *
 * It reads every task's later events, but the openings only while an account's event stream is open here
 * (and OPENINGS_LINGER_MS after the last one closed): only those show a task's first status, and a task's
 * opening otherwise reaches this edge's views from the create that wrote it (TaskViewReader.created), or from
 * the task's log when another edge's task is first asked for. One delivery less per create. Adding or dropping
 * the openings reopens the feed where it stopped, so nothing is skipped.
 */
export class TaskEventHub {
  private readonly byTask = new Map<number, Set<StatusListener>>();
  private readonly byAccount = new Map<string, Set<StatusListener>>();
  /** Creates on this edge waiting to hear the upstream's answer, by task id. */
  private readonly submissions = new Map<number, (outcome: SubmissionOutcome) => void>();
  private feed: OrderedFeed | undefined;
  private stopped = false;
  /** Whether the feed reads the openings too (see the class comment). */
  private openings = false;
  private dropOpenings: NodeJS.Timeout | undefined;

  constructor(
    private readonly nats: Pick<Nats, "js" | "jsm" | "nc">,
    private readonly taskLog: TaskLog,
    private readonly log: Logger,
    /**
     * The edge's task views: fed every event in log order and told whether the feed runs; the hub turns an
     * event into a status change from the view it holds before the event (without reading the task's log),
     * and gives them a view it had to fold from the log (`learn`).
     */
    private readonly views: { apply(event: TaskEvent): void; setFed(fed: boolean): void; peek(taskId: number): TaskView | undefined; learn(view: TaskView): void },
    private readonly openingsLingerMs = OPENINGS_LINGER_MS,
  ) {}

  /** Opens the feed at the end of the log; resolves once it runs. */
  async start(): Promise<void> {
    const from = (await this.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    const js = feedClient(this.nats.nc);
    // Lost consumers (a node gone, the consumer deleted) are noticed and replaced by the feed itself.
    const feed = new OrderedFeed({
      what: "task log (edge)",
      log: this.log,
      from,
      open: (position) =>
        js.consumers.get(STREAMS.events.name, {
          filter_subjects: this.openings ? [...TASK_LOG_SUBJECTS] : [TASK_LATER_EVENTS],
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: position + 1,
        }),
      take: (msg) => this.take(msg.json(), msg.seq, accountOfSubject(msg.subject)),
      onBehind: (behind) => this.views.setFed(!behind),
    });
    this.feed = feed;
    await feed.start();
    void (async () => {
      for await (const change of this.nats.nc.status()) {
        if (this.stopped) break;
        // A disconnect leaves the views as they are: nothing can be read from NATS until the reconnect (a query
        // answered from memory beats a 503), and /healthz says 503 meanwhile (no connection, a silent feed).
        // After it the feed is reopened where it stopped at once, instead of waiting for the client to find
        // the consumer again; reads go to NATS until the new one has caught up.
        if (change.type === "reconnect") feed.reopen("reconnected");
      }
    })();
  }

  /** Stream sequence of the last event processed. */
  get position(): number {
    return this.feed?.position ?? 0;
  }

  /** Why the edge's view of the tasks may be old (undefined: it is current), for /healthz; see FeedLiveness. */
  behindReason(): string | undefined {
    if (!this.feed) return "the feed of the task log has not started";
    const why = this.feed.behindReason();
    return why === undefined ? undefined : `the feed of the task log ${why}`;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.dropOpenings);
    this.feed?.stop();
  }

  /** Whether the feed reads the openings now (for tests and metrics). */
  get readsOpenings(): boolean {
    return this.openings;
  }

  /** One event: to the views, to a create waiting for it, and as a status change to the streams following it (in order). */
  private async take(raw: unknown, sequence: number, account: string): Promise<void> {
    const parsed = TaskEvent.safeParse(taskMessageBody(raw));
    if (parsed.success) {
      if (this.submissions.size > 0) this.answerSubmission(parsed.data);
      await this.process(parsed.data, sequence, account).catch((error: unknown) => this.log.warn({ err: error, seq: sequence }, "task event not turned into a status change"));
      this.views.apply(parsed.data);
    }
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
    const unsubscribe = subscribe(this.byAccount, account, listener);
    this.readOpenings();
    return () => {
      unsubscribe();
      if (this.byAccount.size === 0) this.lingerOpenings();
    };
  }

  private readOpenings(): void {
    clearTimeout(this.dropOpenings);
    this.dropOpenings = undefined;
    if (this.openings) return;
    this.openings = true;
    // Reopened after the last event taken: the openings from there on come, none is skipped.
    this.feed?.reopen("an account's event stream opened: openings are read too", true);
  }

  private lingerOpenings(): void {
    clearTimeout(this.dropOpenings);
    this.dropOpenings = setTimeout(() => {
      this.dropOpenings = undefined;
      if (this.stopped || this.byAccount.size > 0 || !this.openings) return;
      this.openings = false;
      this.feed?.reopen("no account's event stream open: openings are read no more", true);
    }, this.openingsLingerMs);
    this.dropOpenings.unref();
  }

  /** Open streams, for metrics. */
  get listeners(): number {
    let count = 0;
    for (const set of this.byTask.values()) count += set.size;
    for (const set of this.byAccount.values()) count += set.size;
    return count;
  }

  /** Called before the views take the event: they still hold the task as it was. */
  private async process(event: TaskEvent, sequence: number, account: string): Promise<void> {
    const { taskId } = event.meta;
    if (!this.byTask.has(taskId) && this.byAccount.size === 0) return; // nobody follows it
    const { before, read } = await this.viewBefore(event, account);
    const { view, change } = applyForStatus(before, event, sequence);
    // A task the views did not hold (another edge's, followed here): kept from now on, so its next events need no read.
    if (read && view) this.views.learn(view);
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

  /** The task's view just before `event`: the edge's, or folded from its log (`read`). */
  private async viewBefore(event: TaskEvent, account: string): Promise<{ before: TaskView | null; read: boolean }> {
    if (event.type === "TaskSubmitted") return { before: null, read: false };
    const known = this.views.peek(event.meta.taskId);
    if (known && known.version === event.meta.version - 1) return { before: known, read: false };
    let view: TaskView | null = null;
    for (const { event: earlier } of await this.taskLog.history(account, event.meta.taskId)) {
      if (earlier.meta.version < event.meta.version) view = evolveTaskView(view, earlier);
    }
    return { before: view, read: true };
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
