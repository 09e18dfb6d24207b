import type { KV } from "@nats-io/kv";
import { TASK_LOG_SUBJECTS, TaskView, type TaskEvent } from "../../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { balancesProjection, taskChargesProjection } from "../billing/projections.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { ProjectionRunner, type Projection } from "../shared/projection.ts";
import { taskEventCodec } from "../shared/taskLog.ts";
import { evolveTaskView, isFinalView, taskViewKey } from "../tasks/taskView.ts";

/**
 * The task views in `task_views`: only final ones are written. A running task's view changes a few times in
 * seconds and every reader folds it from the task's log or has it from its feed (the edge's TaskViewReader
 * reads the bucket for final views only), so writing each step cost messages and no reader used them.
 */
export const taskViewProjection: Projection<TaskEvent, TaskView> = {
  name: "task views",
  stream: STREAMS.events.name,
  subjects: TASK_LOG_SUBJECTS,
  decode: taskEventCodec.decode,
  keyOf: (event) => taskViewKey(event.meta.taskId),
  startsDocument: (event) => event.type === "TaskSubmitted",
  evolve: evolveTaskView,
  docSchema: TaskView,
  persists: isFinalView,
};

/**
 * Ledger read models batch every 250 ms (as the task counters do): a busy account's movements then fold into
 * one `balances` write, which every edge's mirror also receives. At 100 ms, a burst of creates from 20
 * accounts cost about 3 NATS messages per create in `balances` writes alone. Creates and chat check money on
 * the ledger writer's own fold, not on these.
 */
const LEDGER_MODEL_LINGER_MS = 250;

interface Stoppable {
  stop(): Promise<void>;
}

/** Keeps the ledger's read models up to date, each through its own durable consumer (the task log's: taskLogReactors.ts). */
export class ProjectorService {
  private runners: Stoppable[] = [];

  constructor(private readonly nats: Nats, private readonly log: Logger) {}

  async start(): Promise<void> {
    const { nats } = this;
    this.runners = [
      await this.run(balancesProjection, CONSUMERS.balancesProjector, nats.balances),
      await this.run(taskChargesProjection, CONSUMERS.taskChargesProjector, nats.taskCharges),
    ];
  }

  async stop(): Promise<void> {
    await Promise.all(this.runners.map((runner) => runner.stop()));
  }

  private async run<Event, Doc>(projection: Projection<Event, Doc>, durable: string, bucket: KV): Promise<Stoppable> {
    const runner = new ProjectionRunner(projection, this.nats, durable, bucket, this.log.child({ projection: projection.name }), LEDGER_MODEL_LINGER_MS);
    await runner.start();
    return runner;
  }
}
