import { TaskEvent, TaskView } from "../../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { ProjectionRunner, type Projection } from "./projection.ts";
import { evolveTaskView, taskViewKey } from "./taskView.ts";

export const taskViewProjection: Projection<TaskEvent, TaskView> = {
  name: "task views",
  decode: (raw) => TaskEvent.parse(raw),
  keyOf: (event) => taskViewKey(event.meta.taskId),
  evolve: evolveTaskView,
  docSchema: TaskView,
};

/** Keeps the read models up to date from the event streams. */
export class ProjectorService {
  private runners: Array<ProjectionRunner<TaskEvent, TaskView>> = [];

  constructor(private readonly nats: Nats, private readonly log: Logger) {}

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.tasks.name, CONSUMERS.taskViewProjector);
    const runner = new ProjectionRunner(taskViewProjection, consumer, this.nats.taskViews, this.log);
    runner.start();
    this.runners = [runner];
  }

  async stop(): Promise<void> {
    await Promise.all(this.runners.map((runner) => runner.stop()));
  }
}
