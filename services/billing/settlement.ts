import { lruOf } from "../shared/lruOf.ts";
import type { TaskEvent } from "../../contracts/videoTask.ts";
import { failpoint } from "../shared/failpoints.ts";
import type { Logger } from "../shared/log.ts";
import { settlementProblems } from "../shared/metrics/metrics.ts";
import { tryUntilStopped } from "../shared/retryPause.ts";
import type { WrittenBehind } from "../shared/batchReactor.ts";
import type { TaskLog, TaskLogEntry } from "../shared/taskLog.ts";
import { contextOfMessage } from "../shared/tracing/natsTraceHeaders.ts";
import { inSpan, SpanKind } from "../shared/tracing/tracing.ts";
import type { ReservationCloser } from "./reservationCloser.ts";
import { costMicros } from "./pricing.ts";

/**
 * How long a task's settlement waits, on an account with no write under way, for others of the account to be
 * written with it (AccountLedger's `closeLingerMs`): fewer money messages, each of which fences the account's
 * next write in every other process. With the instant suite's 20 busy accounts, a settlement alone per write
 * made a quarter of creates and a third of settlements lose a race; grouped for 100 ms, the suite's tasks cost
 * 10% fewer messages and ran 15–35% faster (docs/benchmarks.md). Charges land up to 100 ms later; no reactor
 * waits for them, and a create never waits for lingering closes.
 */
export const SETTLEMENT_LINGER_MS = 100;

/** What settling a task needs that only its opening says. */
interface Billing {
  model: string;
  pricePerMillionTokens: number;
  /** The opening's stream sequence: the reservation is there, and its closing after it. */
  openedAt: number;
}

type FinalEvent = Extract<TaskEvent, { type: "GenerationSucceeded" | "GenerationFailed" }>;

/**
 * Settles what finished tasks cost, as one of the reactors on the task log (services/projector/
 * eventReactors.ts): a task's success charges its real cost against the reservation its opening made, a
 * failure releases it (failed work is free). A batch stays unacknowledged until its ledger writes are done, so
 * a crash anywhere delivers it again, and the ledger's decision (no open reservation → nothing to do) plus the
 * cause-derived msgID make the repeat charge nothing twice. A final task with nothing to close that was never
 * closed before is never a quiet zero: it is logged as an error and counted (`reelay audit` names it too).
 * Model and price come from the task's opening, remembered as it passes (or read from the task's log for a task
 * first met at its end); a settled task's are kept (the cache is bounded) so a batch tried again still finds them.
 */
export class Settlement {
  private readonly billing = lruOf<number, Billing>(100_000);
  private readonly stopping = new AbortController();

  constructor(
    private readonly ledger: ReservationCloser,
    private readonly taskLog: Pick<TaskLog, "history">,
    private readonly log: Logger,
  ) {}

  /**
   * A batch in log order: a task's opening is remembered before its final event; tasks settle in parallel,
   * behind the batch (the reactors go on with the next one; the batch is acknowledged once its settlements are
   * written: `durable`). The ledger lingers a little before writing an idle account's closes (services/projector),
   * which must not hold every other reactor. A settlement that fails is tried again until it is written or the
   * reactors stop: then the batch stays unacknowledged and is handed over again, where the ledger's decision
   * makes what was settled already a no-op.
   */
  async handleEntries(entries: readonly TaskLogEntry[]): Promise<WrittenBehind> {
    const settling: Array<Promise<void>> = [];
    for (const { event, account, msg, seq } of entries) {
      if (event.type === "TaskSubmitted") this.billing.set(event.meta.taskId, billingOf(event, seq));
      else if (event.type === "GenerationSucceeded" || event.type === "GenerationFailed") {
        const span = { kind: SpanKind.CONSUMER, parent: contextOfMessage(msg), attributes: { "reelay.task_id": event.meta.taskId } };
        settling.push(this.untilSettled(() => inSpan("settle video task", span, () => this.settle(account, event)), account, event.meta.taskId));
      }
    }
    return { durable: Promise.all(settling).then(() => undefined) };
  }

  /** Stops trying failed settlements again (their batches are handed over again). */
  stop(): void {
    this.stopping.abort();
  }

  private untilSettled(settle: () => Promise<void>, account: string, taskId: number): Promise<void> {
    return tryUntilStopped(settle, this.stopping.signal, (error, attempt) =>
      this.log.warn({ err: error, account, taskId, attempt }, "settlement: could not write the task's charge; trying again"),
    );
  }

  private async settle(account: string, event: FinalEvent): Promise<void> {
    const taskId = event.meta.taskId;
    const billing = this.billing.get(taskId) ?? (await this.billingFromLog(account, taskId));
    if (!billing) {
      this.problem(account, taskId, "a final task without an opening in its log: nothing was reserved, nothing can be charged");
      return;
    }
    failpoint("settlement:before-append");
    const command =
      event.type === "GenerationSucceeded"
        ? {
            type: "settle" as const,
            taskId,
            costMicros: costMicros([{ tokens: event.data.totalTokens, pricePerMillionTokens: billing.pricePerMillionTokens }]),
            totalTokens: event.data.totalTokens,
            model: billing.model,
          }
        : { type: "release" as const, taskId, reason: event.data.reason };
    const outcome = await this.ledger.close(account, command, billing.openedAt);
    if (outcome === "notReserved") this.problem(account, taskId, "a final task whose reservation was never opened or is gone: not charged");
    failpoint("settlement:after-append");
  }

  private problem(account: string, taskId: number, what: string): void {
    settlementProblems.inc({ kind: "not_reserved" });
    this.log.error({ account, taskId }, `settlement: ${what}; run \`reelay audit\``);
  }

  private async billingFromLog(account: string, taskId: number): Promise<Billing | undefined> {
    const [first] = await this.taskLog.history(account, taskId);
    return first?.event.type === "TaskSubmitted" ? billingOf(first.event, first.sequence) : undefined;
  }
}

function billingOf({ data: { job } }: Extract<TaskEvent, { type: "TaskSubmitted" }>, openedAt: number): Billing {
  return { model: job.model, pricePerMillionTokens: job.pricePerMillionTokens, openedAt };
}
