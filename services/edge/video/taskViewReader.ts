import { KvWatchInclude, type KV } from "@nats-io/kv";
import { TaskView } from "../../../contracts/videoTask.ts";
import type { Logger } from "../../shared/log.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { evolveTaskView, taskViewKey } from "../../tasks/taskView.ts";

const CACHE_LIMIT = 100_000;

/**
 * Answers "what is task N now" from the task_views read model. A watch keeps recently changed views in
 * memory, so polling clients cost no NATS round trip; older views come from the bucket. A task the
 * projector has not reached yet (created a moment ago) is folded from its log, so a fresh task never 404s.
 */
export class TaskViewReader {
  private readonly cache = new Map<number, TaskView>();
  private stopWatching: (() => void) | undefined;

  constructor(private readonly bucket: KV, private readonly taskLog: TaskLog, private readonly log: Logger) {}

  async start(): Promise<void> {
    const watch = await this.bucket.watch({ include: KvWatchInclude.UpdatesOnly });
    this.stopWatching = () => watch.stop();
    (async () => {
      for await (const entry of watch) {
        if (entry.operation !== "PUT") continue;
        this.remember(TaskView.parse(entry.json()));
      }
    })().catch((error: unknown) => this.log.error({ err: error }, "task view watch ended"));
  }

  stop(): void {
    this.stopWatching?.();
  }

  get(taskId: number): TaskView | undefined | Promise<TaskView | undefined> {
    return this.cache.get(taskId) ?? this.load(taskId);
  }

  private async load(taskId: number): Promise<TaskView | undefined> {
    const entry = await this.bucket.get(taskViewKey(taskId));
    if (entry && entry.operation === "PUT") return this.remember(TaskView.parse(entry.json()));
    const { events } = await this.taskLog.read(taskId);
    return events.reduce<TaskView | null>(evolveTaskView, null) ?? undefined;
  }

  private remember(view: TaskView): TaskView {
    const cached = this.cache.get(view.taskId);
    if (cached && cached.version >= view.version) return cached;
    this.cache.delete(view.taskId);
    this.cache.set(view.taskId, view);
    if (this.cache.size > CACHE_LIMIT) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    return view;
  }
}
