import type { JsMsg } from "@nats-io/jetstream";
import { isLedgerSubject, ledgerEventsOf, type LedgerEvent } from "../../contracts/ledger.ts";
import { accountOfSubject, TaskEvent } from "../../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import type { ReservationCloser } from "../billing/reservationCloser.ts";
import { balancesProjection } from "../billing/projections.ts";
import { Settlement } from "../billing/settlement.ts";
import { handledTogether, startBatchReactor, type WrittenBehind } from "../shared/batchReactor.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { parkUndecodable, ProjectionRunner } from "../shared/projection.ts";
import { TaskLog, taskMessageBody, type TaskLogEntry } from "../shared/taskLog.ts";
import { WriteBehind } from "../shared/writeBehind.ts";
import { TaskDirectory } from "../tasks/taskDirectory.ts";
import { TaskStatsReactor } from "../tasks/taskStats.ts";
import { foldTaskView } from "../tasks/taskView.ts";
import { WebhookOutbox } from "../webhooks/webhookOutbox.ts";
import { IdempotencyIndex, IdempotencyIndexer } from "../tasks/idempotencyIndex.ts";
import { taskViewProjection } from "../tasks/taskViewProjection.ts";

interface TaskLogReactor {
  /** Resolves once the batch is handled; with `durable`, its writes are kept only once that resolves too. */
  handleEntries(entries: readonly TaskLogEntry[]): Promise<void | WrittenBehind>;
}

/**
 * Ledger read models are written once a second while the log keeps bringing changes, and a quarter of a second
 * after the last one otherwise (as the task counters are): a busy account's movements then fold into one
 * `balances` write a second, which every edge's mirror also receives. Creates and chat check money on the
 * ledger writer's own fold, not on these (the one reader on a request's path, the gate of free chat models,
 * asks the ledger before it refuses); operators' listings may show a balance up to a second old.
 */
const LEDGER_MODEL_LINGER_MS = 1_000;
const LEDGER_MODEL_QUIET_MS = 250;

/** What one message of EVENTS holds for the reactors: a task's event (openings, later events), ledger events (openings, the ledger's own). */
interface EventsMessage {
  task: TaskLogEntry | undefined;
  money: Array<{ event: LedgerEvent; seq: number }>;
}

/** Parses a message once for every reactor: `acct.A.money.E.ledger`, `acct.A.money.E.task.N` (an opening: both), `acct.A.task.N.state`. */
function decodeEventsMessage(msg: JsMsg): EventsMessage {
  const raw: unknown = msg.json();
  const account = accountOfSubject(msg.subject);
  const kind = msg.subject.slice("acct.".length + account.length + 1);
  const money = kind.startsWith("money.") ? ledgerEventsOf(raw).map((event) => ({ event, seq: msg.seq })) : [];
  if (isLedgerSubject(kind)) return { task: undefined, money };
  return { task: { event: TaskEvent.parse(taskMessageBody(raw)), account, seq: msg.seq, msg }, money };
}

/**
 * Every reactor on the event log, fed by one batch reactor on one durable consumer (`task_log_reactors`):
 * the views (`task_views`, final ones only), the counters (`task_stats`), settlement (the ledger), the webhook
 * jobs, the Idempotency-Key index, and the ledger's read model (`balances`). Each message is
 * delivered, parsed and validated once for all of them (an opening once for the task's reactors and the
 * ledger's), and acknowledged with its batch (the counters and ledger models are written behind: a batch is
 * acknowledged once they are kept too). A batch goes to all at once (they write different places); if one
 * fails, the batch is handed over again to all, which each absorb: the read models are idempotent,
 * the ledger's decision makes a repeated settlement a no-op, webhook jobs carry a msgID.
 *
 * An event no reactor can decode is parked on the dead-letter subject of the views (`deadletter.task_views`)
 * and the rest of its batch goes on.
 */
export async function startEventReactors(nats: Nats, ledger: ReservationCloser, log: Logger): Promise<{ stop(): Promise<void> }> {
  const taskLog = new TaskLog(nats.js, nats.jsm);
  const directory = new TaskDirectory();
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
  const settlement = new Settlement(ledger, taskLog, log.child({ reactor: "settlement" }));
  const balances = new ProjectionRunner(balancesProjection, nats, CONSUMERS.taskLogReactors, nats.balances, log.child({ projection: balancesProjection.name }));
  const ledgerModels = new WriteBehind(
    LEDGER_MODEL_LINGER_MS,
    () => {
      const balancesHeld = balances.takeHeld();
      return async () => void (await balancesHeld());
    },
    log,
    "ledger read models",
    LEDGER_MODEL_QUIET_MS,
  );
  const reactors: TaskLogReactor[] = [
    { handleEntries: (entries) => views.handleEvents(entries) },
    stats,
    settlement,
    new IdempotencyIndexer(new IdempotencyIndex(nats.js, nats.idempotency)),
    new WebhookOutbox(nats.js, directory, taskLog),
  ];
  const reactor = await startBatchReactor(nats, {
    stream: STREAMS.events.name,
    durable: CONSUMERS.taskLogReactors,
    what: "task log reactors",
    log,
    handle: async (batch) => {
      const entries: TaskLogEntry[] = [];
      const money: EventsMessage["money"] = [];
      const parked: Array<Promise<void>> = [];
      accounts.clear();
      for (const msg of batch) {
        try {
          const decoded = decodeEventsMessage(msg);
          money.push(...decoded.money);
          if (!decoded.task) continue;
          entries.push(decoded.task);
          accounts.set(decoded.task.event.meta.taskId, decoded.task.account);
          directory.learn(decoded.task.event);
        } catch (error) {
          parked.push(parkUndecodable(nats, taskViewProjection.name, msg, error, log));
        }
      }
      const ledgerKept = balances.holdEvents(money, ledgerModels);
      // Its failure is the batch's (through `durable`), not an unhandled rejection while the others finish.
      ledgerKept.catch(() => undefined);
      return handledTogether([...parked, ...reactors.map((reactor) => reactor.handleEntries(entries)), { durable: ledgerKept }]);
    },
  });
  return {
    stop: async () => {
      // The counters write what they hold at once, and give up a write that keeps failing instead of holding the stop.
      const writesStopped = Promise.all([stats.stop(), ledgerModels.stop()]);
      settlement.stop();
      await reactor.stop();
      await writesStopped;
    },
  };
}
