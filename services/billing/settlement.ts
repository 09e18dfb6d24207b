import type { JsMsg } from "@nats-io/jetstream";
import { SettleVideoTask } from "../../contracts/ledger.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { failpoint } from "../shared/failpoints.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { pullLoop } from "../shared/pullLoop.ts";
import { contextFromHeaders } from "../shared/tracing/natsTraceHeaders.ts";
import { inSpan, SpanKind } from "../shared/tracing/tracing.ts";
import type { AccountLedger } from "./accountLedger.ts";
import { costMicros } from "./pricing.ts";

/**
 * Settles what finished tasks cost: a success charges its real cost against the reservation, a failure
 * releases it (failed work is free). Runners queue each finished task on SETTLEMENTS before letting go of
 * it; an item stays there until its ledger write is done, so a crash anywhere delivers it again, and the
 * ledger's decision (no open reservation → nothing to do) plus the cause-derived msgID make the repeat
 * charge nothing twice.
 */
export class Settlement {
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly nats: Nats, private readonly ledger: AccountLedger, private readonly log: Logger) {}

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.settlements.name, CONSUMERS.settlers);
    this.loop = pullLoop(consumer, {
      signal: this.stopping.signal,
      room: () => 256,
      take: (msg) => {
        const work = this.handle(msg).finally(() => this.inFlight.delete(work));
        this.inFlight.add(work);
      },
      log: this.log,
      what: "settlement",
    });
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    await Promise.allSettled(this.inFlight);
  }

  private async handle(msg: JsMsg): Promise<void> {
    const parsed = SettleVideoTask.safeParse(msg.json());
    if (!parsed.success) {
      this.log.error({ seq: msg.seq, issues: parsed.error.issues }, "unreadable settlement item; parking it");
      msg.term("unreadable settlement item");
      return;
    }
    try {
      const span = { kind: SpanKind.CONSUMER, parent: contextFromHeaders(msg.headers), attributes: { "reelay.task_id": parsed.data.taskId } };
      await inSpan("settle video task", span, () => this.settle(parsed.data));
      msg.ack();
    } catch (error) {
      this.log.error({ err: error, taskId: parsed.data.taskId }, "settling a task failed; retrying");
      msg.nak(1000);
    }
  }

  private async settle(item: SettleVideoTask): Promise<void> {
    const { taskId, account, model, outcome } = item;
    failpoint("settlement:before-append");
    if (outcome.kind === "succeeded") {
      const cost = costMicros([{ tokens: outcome.totalTokens, pricePerMillionTokens: item.pricePerMillionTokens }]);
      await this.ledger.execute(account, { type: "settle", taskId, costMicros: cost, totalTokens: outcome.totalTokens, model });
    } else {
      await this.ledger.execute(account, { type: "release", taskId, reason: outcome.reason });
    }
    failpoint("settlement:after-append");
  }
}
