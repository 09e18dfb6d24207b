import type { KV } from "@nats-io/kv";
import { LRUCache } from "lru-cache";
import { TaskView } from "../../../contracts/videoTask.ts";
import { KvMirror } from "../../shared/kvMirror.ts";
import type { Logger } from "../../shared/log.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { evolveTaskView, taskViewKey } from "../../tasks/taskView.ts";

const CACHE_LIMIT = 100_000;

/**
 * Answers "what is task N now" from the task_views read model. A watch keeps recently changed views in
 * memory, so polling clients cost no NATS round trip; older views come from the bucket. A task the
 * projector has not reached yet (created a moment ago) is folded from its log, so a fresh task never 404s.
 * A view is only ever replaced by a newer version, so one edge never answers a task's status going back.
 */
export class TaskViewReader {
  private readonly cache = new LRUCache<number, TaskView>({ max: CACHE_LIMIT });
  readonly mirror: KvMirror<TaskView>;

  constructor(private readonly bucket: KV, private readonly taskLog: TaskLog, log: Logger) {
    this.mirror = new KvMirror(bucket, {
      name: "task views",
      updatesOnly: true,
      decode: (entry) => TaskView.parse(entry.json()),
      onPut: (_key, view) => this.remember(view),
      // Views are never deleted; a purge only drops our copy.
      onDelete: (key) => this.cache.delete(Number(key)),
      log,
    });
  }

  start(): Promise<void> {
    return this.mirror.start();
  }

  stop(): void {
    this.mirror.stop();
  }

  get(taskId: number): TaskView | undefined | Promise<TaskView | undefined> {
    return this.cache.get(taskId) ?? this.load(taskId);
  }

  private async load(taskId: number): Promise<TaskView | undefined> {
    const entry = await this.bucket.get(taskViewKey(taskId));
    if (entry && entry.operation === "PUT") return this.remember(TaskView.parse(entry.json()));
    const { events } = await this.taskLog.read(taskId);
    const folded = events.reduce<TaskView | null>(evolveTaskView, null);
    // Kept, so the next read cannot answer an older view from a bucket the projector has not caught up on.
    return folded ? this.remember(folded) : undefined;
  }

  private remember(view: TaskView): TaskView {
    const cached = this.cache.get(view.taskId);
    if (cached && cached.version >= view.version) return cached;
    this.cache.set(view.taskId, view);
    return view;
  }
}
