import type { KV } from "@nats-io/kv";
import { lruOf } from "../../shared/lruOf.ts";
import { TaskView, type TaskEvent } from "../../../contracts/videoTask.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { evolveTaskView, foldTaskView, isFinalView, taskViewKey } from "../../tasks/taskView.ts";

const CACHE_LIMIT = 100_000;
/**
 * A final view read from the bucket is kept this long at most: the bucket trails the log by the projector's
 * lag, so a deletion written just before the read could be missing from it (the edge's feed passed it while
 * the view was not in memory). Views folded from the log or the feed are exact and stay until evicted.
 */
const BUCKET_VIEW_TTL_MS = 5_000;

/**
 * Answers "what is task N now" from memory, kept current by the edge's feed of the task log (`apply`, in
 * log order: the same ordered consumer that serves event streams), so polling clients cost no NATS round
 * trip and the edge needs no watch on the `task_views` bucket. A task not in memory is read once: a final
 * view from the bucket, any other from its log (the truth, even for a task created a moment ago that the
 * projector has not reached); feed events that pass during that read are folded in after it. A view is
 * only ever replaced by a newer version, so one edge never answers a task's status going back.
 */
export class TaskViewReader {
  private readonly cache = lruOf<number, TaskView>(CACHE_LIMIT);
  /** Tasks being read, with the feed's events of each that came meanwhile. */
  private readonly reading = new Map<number, TaskEvent[]>();
  /** Tasks whose feed event came after a gap: the version their next read must reach (else it reads the log). */
  private readonly atLeast = lruOf<number, number>(10_000);
  /** False while the feed is behind (reopening, catching up): memory may be old, so reads go to NATS meanwhile. */
  private fed = true;

  constructor(private readonly bucket: KV, private readonly taskLog: Pick<TaskLog, "read">) {}

  /** Task `taskId` of `account` (another account's task is not found: a task's log is only read under its own account). */
  get(account: string, taskId: number): TaskView | undefined | Promise<TaskView | undefined> {
    const held = this.peek(taskId);
    if (held) return held.account === account ? held : undefined;
    return this.load(account, taskId).then((view) => (view?.account === account ? view : undefined));
  }

  /** The view held in memory, if any (never read from NATS). */
  peek(taskId: number): TaskView | undefined {
    return this.fed ? this.cache.get(taskId) : undefined;
  }

  /**
   * A create on this edge is about to write task `taskId`'s opening: the feed's events of the task are held
   * from now until `created` (the feed may bring the upstream's answer before the write's acknowledgement
   * resumes the create) or `notCreated`.
   */
  creating(taskId: number): void {
    this.reading.set(taskId, []);
  }

  /**
   * The opening a create on this edge wrote (acknowledged): the task's view, with what the feed brought
   * meanwhile. The feed reads openings only while an account's event stream is open (TaskEventHub), so this
   * is how a task made here enters memory.
   */
  created(opening: TaskEvent): void {
    const { taskId } = opening.meta;
    const view = this.withHeldEvents(taskId, evolveTaskView(null, opening));
    this.reading.delete(taskId);
    if (view) this.remember(view, true, true);
  }

  /**
   * A view folded from the task's log up to the feed's event being taken (the hub, for a task followed here
   * that memory did not hold): kept, so the feed's next events of the task keep it current.
   */
  learn(view: TaskView): void {
    this.remember(view, true, true);
  }

  /** The create of `taskId` wrote no opening of its own (it failed, or an earlier create's task is the answer). */
  notCreated(taskId: number): void {
    this.reading.delete(taskId);
  }

  /** The next event of the task log (every task's later events, and openings while the feed reads them, in log order). */
  apply(event: TaskEvent): void {
    const { taskId, version } = event.meta;
    const pending = this.reading.get(taskId);
    // A read under way folds the event into what it reads. What memory holds of the task (the feed's view, kept
    // while a read goes to NATS because the feed was behind) takes it too: otherwise that view kept its old status
    // once the feed was current again, and the edge answered "running" for a task that had succeeded.
    pending?.push(event);
    if (pending && !this.cache.has(taskId)) return;
    if (event.type === "TaskSubmitted") {
      const view = evolveTaskView(null, event);
      if (view) this.remember(view, true, true);
      return;
    }
    const known = this.cache.get(taskId);
    if (!known || known.version >= version) return;
    // A gap (a view from the bucket that was behind): read the task again, from its log, when next asked for.
    if (known.version !== version - 1) {
      this.cache.delete(taskId);
      this.atLeast.set(taskId, version);
    } else {
      const view = evolveTaskView(known, event);
      if (view) this.remember(view, true, true);
    }
  }

  /**
   * Whether the feed is current. It resumes after the last event it passed and its events are kept even
   * while it catches up, so what memory holds is current once it is; meanwhile every read goes to NATS and
   * what it reads is not kept.
   */
  setFed(fed: boolean): void {
    this.fed = fed;
  }

  private async load(account: string, taskId: number): Promise<TaskView | undefined> {
    const ownRead = !this.reading.has(taskId);
    if (ownRead) this.reading.set(taskId, []);
    try {
      const entry = await this.bucket.get(taskViewKey(taskId));
      const stored = entry && entry.operation === "PUT" ? TaskView.parse(entry.json()) : undefined;
      const current = stored !== undefined && stored.version >= (this.atLeast.get(taskId) ?? 0);
      if (current && isFinalView(stored)) return this.settle(taskId, stored, false, ownRead);
      const { events } = await this.taskLog.read(account, taskId);
      return this.settle(taskId, foldTaskView(events) ?? undefined, true, ownRead);
    } finally {
      if (ownRead) this.reading.delete(taskId);
    }
  }

  /** Folds in what the feed brought during the read, and keeps the result. */
  private settle(taskId: number, read: TaskView | undefined, exact: boolean, ownRead: boolean): TaskView | undefined {
    const view = ownRead ? this.withHeldEvents(taskId, read ?? null) : (read ?? null);
    return view ? this.remember(view, exact) : undefined;
  }

  /** `view` with the feed's events of the task held meanwhile folded in: only each next version (a task not found yet starts with its TaskSubmitted). */
  private withHeldEvents(taskId: number, view: TaskView | null): TaskView | null {
    let folded = view;
    for (const event of this.reading.get(taskId) ?? []) if (event.meta.version === (folded?.version ?? 0) + 1) folded = evolveTaskView(folded, event);
    return folded;
  }

  /** `fromFeed`: the feed's next event of a view it holds, kept whether or not the feed is current yet. */
  private remember(view: TaskView, exact: boolean, fromFeed = false): TaskView {
    const cached = this.cache.get(view.taskId);
    if (cached && cached.version >= view.version) return cached;
    if (this.fed || fromFeed) this.cache.set(view.taskId, view, exact ? {} : { ttl: BUCKET_VIEW_TTL_MS });
    return view;
  }
}
