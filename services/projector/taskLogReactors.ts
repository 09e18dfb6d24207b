import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import type { AccountLedger } from "../billing/accountLedger.ts";
import { Settlement } from "../billing/settlement.ts";
import { startBatchReactor, type WrittenBehind } from "../shared/batchReactor.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { parkUndecodable, ProjectionRunner } from "../shared/projection.ts";
import { TaskLog, taskLogEntries, type TaskLogEntry } from "../shared/taskLog.ts";
import { TaskDirectory } from "../tasks/taskDirectory.ts";
import { TaskStatsReactor } from "../tasks/taskStats.ts";
import { foldTaskView } from "../tasks/taskView.ts";
import { WebhookOutbox } from "../webhooks/webhookOutbox.ts";
import { IdempotencyIndex, IdempotencyIndexer } from "../tasks/idempotencyIndex.ts";
import { taskViewProjection } from "./projectorService.ts";

interface TaskLogReactor {
  /** Resolves once the batch is handled; with `durable`, its writes are kept only once that resolves too. */
  handleEntries(entries: readonly TaskLogEntry[]): Promise<void | WrittenBehind>;
}

/**
 * Every reactor on the task log, fed by one batch reactor on one durable consumer (`task_log_reactors`):
 * the views (`task_views`, final ones only), the counters (`task_stats`), settlement (the ledger), the webhook
 * jobs and the Idempotency-Key index. Each event is delivered, parsed and validated once for all five, and
 * acknowledged with its batch (the counters are written behind: a batch is acknowledged once they are kept
 * too). A batch goes to all five at once (they write different places); if one fails, the batch is handed
 * over again to all five, which each absorb: the read models are idempotent,
 * the ledger's decision makes a repeated settlement a no-op, webhook jobs carry a msgID.
 *
 * An event no reactor can decode is parked on the dead-letter subject of the views (`deadletter.task_views`)
 * and the rest of its batch goes on.
 */
export async function startTaskLogReactors(nats: Nats, ledger: AccountLedger, log: Logger): Promise<{ stop(): Promise<void> }> {
  const taskLog = new TaskLog(nats.js, nats.jsm);
  const directory = new TaskDirectory(taskLog);
  // The account of each task in the batch at hand: a view met mid-way is folded from its task's log, read under it.
  const accounts = new Map<number, string>();
  const views = new ProjectionRunner(
    taskViewProjection,
    nats,
    CONSUMERS.taskLogReactors,
    nats.taskViews,
    log.child({ projection: taskViewProjection.name }),
    undefined,
    async (key) => {
      const account = accounts.get(Number(key));
      return account === undefined ? null : foldTaskView((await taskLog.read(account, Number(key))).events);
    },
  );
  const stats = new TaskStatsReactor(nats, log.child({ reactor: "task counters" }));
  const reactors: TaskLogReactor[] = [
    { handleEntries: (entries) => views.handleEvents(entries) },
    stats,
    new Settlement(ledger, taskLog, log.child({ reactor: "settlement" })),
    new IdempotencyIndexer(new IdempotencyIndex(nats.js, nats.idempotency)),
    new WebhookOutbox(nats.js, directory),
  ];
  const reactor = await startBatchReactor(nats, {
    stream: STREAMS.events.name,
    durable: CONSUMERS.taskLogReactors,
    what: "task log reactors",
    log,
    handle: async (batch) => {
      const entries: TaskLogEntry[] = [];
      const parked: Array<Promise<void>> = [];
      accounts.clear();
      for (const msg of batch) {
        try {
          for (const entry of taskLogEntries(msg)) {
            entries.push(entry);
            accounts.set(entry.event.meta.taskId, entry.account);
            directory.learn(entry.event);
          }
        } catch (error) {
          parked.push(parkUndecodable(nats, taskViewProjection.name, msg, error, log));
        }
      }
      const results = await Promise.allSettled([...parked, ...reactors.map((reactor) => reactor.handleEntries(entries))]);
      const durable: Array<Promise<void>> = [];
      for (const result of results) {
        if (result.status === "rejected") throw result.reason;
        if (result.value) durable.push(result.value.durable);
      }
      return { durable: Promise.all(durable).then(() => undefined) };
    },
  });
  return {
    stop: async () => {
      // The counters write what they hold at once, and give up a write that keeps failing instead of holding the stop.
      const statsStopped = stats.stop();
      await reactor.stop();
      await statsStopped;
    },
  };
}
