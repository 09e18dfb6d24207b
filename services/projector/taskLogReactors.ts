import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import type { AccountLedger } from "../billing/accountLedger.ts";
import { Settlement } from "../billing/settlement.ts";
import { startBatchReactor } from "../shared/batchReactor.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { parkUndecodable, ProjectionRunner } from "../shared/projection.ts";
import { TaskLog, taskEventCodec, type TaskLogEntry } from "../shared/taskLog.ts";
import { TaskDirectory } from "../tasks/taskDirectory.ts";
import { TaskIndexer } from "../tasks/taskIndex.ts";
import { TaskStatsReactor } from "../tasks/taskStats.ts";
import { foldTaskView } from "../tasks/taskView.ts";
import { WebhookOutbox } from "../webhooks/webhookOutbox.ts";
import { taskViewProjection } from "./projectorService.ts";

interface TaskLogReactor {
  handleEntries(entries: readonly TaskLogEntry[]): Promise<void>;
}

/**
 * Every reactor on the task log, fed by one batch reactor on one durable consumer (`task_log_reactors`):
 * the views (`task_views`, final ones only), each account's task index (`account_tasks`), the counters (`task_stats`),
 * settlement (the ledger) and the webhook jobs. Each event is delivered, parsed and validated once for all
 * five, and acknowledged with its batch. A batch goes to all five at once (they write different places); if
 * one fails, the batch is handed over again to all five, which each absorb: the read models are idempotent,
 * the ledger's decision makes a repeated settlement a no-op, webhook jobs carry a msgID.
 *
 * An event no reactor can decode is parked on the dead-letter subject of the views (`deadletter.task_views`)
 * and the rest of its batch goes on.
 */
export async function startTaskLogReactors(nats: Nats, ledger: AccountLedger, log: Logger): Promise<{ stop(): Promise<void> }> {
  const taskLog = new TaskLog(nats.js, nats.jsm);
  const directory = new TaskDirectory(taskLog);
  const views = new ProjectionRunner(
    taskViewProjection,
    nats,
    CONSUMERS.taskLogReactors,
    nats.taskViews,
    log.child({ projection: taskViewProjection.name }),
    undefined,
    async (key) => foldTaskView((await taskLog.read(Number(key))).events),
  );
  const reactors: TaskLogReactor[] = [
    { handleEntries: (entries) => views.handleEvents(entries) },
    new TaskIndexer(nats, directory),
    new TaskStatsReactor(nats),
    new Settlement(ledger, taskLog),
    new WebhookOutbox(nats.js, directory),
  ];
  return startBatchReactor(nats, {
    stream: STREAMS.tasks.name,
    durable: CONSUMERS.taskLogReactors,
    what: "task log reactors",
    log,
    handle: async (batch) => {
      const entries: TaskLogEntry[] = [];
      const parked: Array<Promise<void>> = [];
      for (const msg of batch) {
        try {
          for (const event of taskEventCodec.decode(msg.json())) {
            entries.push({ event, seq: msg.seq, msg });
            directory.learn(event);
          }
        } catch (error) {
          parked.push(parkUndecodable(nats, taskViewProjection.name, msg, error, log));
        }
      }
      const results = await Promise.allSettled([...parked, ...reactors.map((reactor) => reactor.handleEntries(entries))]);
      for (const result of results) if (result.status === "rejected") throw result.reason;
    },
  });
}
