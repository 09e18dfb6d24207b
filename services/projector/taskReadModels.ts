import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { startBatchReactor } from "../shared/batchReactor.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { ProjectionRunner } from "../shared/projection.ts";
import { TaskIndexer } from "../tasks/taskIndex.ts";
import { TaskStatsReactor } from "../tasks/taskStats.ts";
import { taskViewProjection } from "./projectorService.ts";

/**
 * The read models of the task log — views (`task_views`), each account's task index (`account_tasks`) and
 * the counters (`task_stats`) — kept by one batch reactor on one durable consumer
 * (`projector_task_read_models`): each event is delivered once for the three instead of once for each.
 * A batch is handed to all three at once (they write different buckets); if one fails, the batch is
 * handed over again to all three, which the idempotent read models absorb.
 */
export async function startTaskReadModels(nats: Nats, log: Logger): Promise<{ stop(): Promise<void> }> {
  const parts = [
    new ProjectionRunner(taskViewProjection, nats, CONSUMERS.taskReadModels, nats.taskViews, log.child({ projection: taskViewProjection.name })),
    new TaskIndexer(nats),
    new TaskStatsReactor(nats),
  ];
  return startBatchReactor(nats, {
    stream: STREAMS.tasks.name,
    durable: CONSUMERS.taskReadModels,
    what: "task read models",
    log,
    handle: async (batch) => {
      const results = await Promise.allSettled(parts.map((part) => part.handleBatch(batch)));
      for (const result of results) if (result.status === "rejected") throw result.reason;
    },
  });
}
