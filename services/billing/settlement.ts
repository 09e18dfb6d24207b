import { LRUCache } from "lru-cache";
import type { TaskEvent } from "../../contracts/videoTask.ts";
import { failpoint } from "../shared/failpoints.ts";
import type { TaskLog, TaskLogEntry } from "../shared/taskLog.ts";
import { contextOfMessage } from "../shared/tracing/natsTraceHeaders.ts";
import { inSpan, SpanKind } from "../shared/tracing/tracing.ts";
import type { AccountLedger } from "./accountLedger.ts";
import { costMicros } from "./pricing.ts";

/** What settling a task needs that only its first event (TaskSubmitted) says. */
interface Billing {
  account: string;
  model: string;
  pricePerMillionTokens: number;
}

/**
 * Settles what finished tasks cost, as one of the reactors on the task log (services/projector/
 * taskLogReactors.ts): a task's success charges its real cost against the reservation, a failure releases it
 * (failed work is free). A batch stays unacknowledged until its ledger writes are done, so a crash anywhere
 * delivers it again, and the ledger's decision (no open reservation → nothing to do) plus the cause-derived
 * msgID make the repeat charge nothing twice. Account, model and price come from the task's TaskSubmitted,
 * remembered as it passes (or read from the task's log for a task first met at its end); a settled task's
 * are kept (the cache is bounded) so a batch tried again still finds them.
 */
export class Settlement {
  private readonly billing = new LRUCache<number, Billing>({ max: 100_000 });

  constructor(private readonly ledger: AccountLedger, private readonly taskLog: Pick<TaskLog, "read">) {}

  /** A batch in log order: a task's TaskSubmitted is remembered before its final event; tasks settle in parallel. */
  async handleEntries(entries: readonly TaskLogEntry[]): Promise<void> {
    const settling: Array<Promise<void>> = [];
    for (const { event, msg } of entries) {
      if (event.type === "TaskSubmitted") this.billing.set(event.meta.taskId, billingOf(event));
      else if (event.type === "GenerationSucceeded" || event.type === "GenerationFailed") {
        const span = { kind: SpanKind.CONSUMER, parent: contextOfMessage(msg), attributes: { "reelay.task_id": event.meta.taskId } };
        settling.push(inSpan("settle video task", span, () => this.settle(event)));
      }
    }
    const failed = (await Promise.allSettled(settling)).find((result) => result.status === "rejected");
    // The whole batch is handed over again: tasks settled already are no-ops for the ledger.
    if (failed) throw failed.reason;
  }

  private async settle(event: Extract<TaskEvent, { type: "GenerationSucceeded" | "GenerationFailed" }>): Promise<void> {
    const taskId = event.meta.taskId;
    const billing = this.billing.get(taskId) ?? (await this.billingFromLog(taskId));
    if (!billing) throw new Error(`task ${taskId} has no TaskSubmitted in its log`);
    failpoint("settlement:before-append");
    if (event.type === "GenerationSucceeded") {
      const cost = costMicros([{ tokens: event.data.totalTokens, pricePerMillionTokens: billing.pricePerMillionTokens }]);
      await this.ledger.execute(billing.account, { type: "settle", taskId, costMicros: cost, totalTokens: event.data.totalTokens, model: billing.model });
    } else {
      await this.ledger.execute(billing.account, { type: "release", taskId, reason: event.data.reason });
    }
    failpoint("settlement:after-append");
  }

  private async billingFromLog(taskId: number): Promise<Billing | undefined> {
    const first = (await this.taskLog.read(taskId)).events[0];
    return first?.type === "TaskSubmitted" ? billingOf(first) : undefined;
  }
}

function billingOf({ data: { account, job } }: Extract<TaskEvent, { type: "TaskSubmitted" }>): Billing {
  return { account, model: job.model, pricePerMillionTokens: job.pricePerMillionTokens };
}
