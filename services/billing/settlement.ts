import type { Consumer, JsMsg } from "@nats-io/jetstream";
import { TaskEvent } from "../../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { failpoint } from "../shared/failpoints.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { TaskLog } from "../shared/taskLog.ts";
import type { AccountLedger } from "./accountLedger.ts";
import { costMicros } from "./pricing.ts";

/**
 * Settles what finished tasks cost: a success charges its real cost against the reservation, a failure
 * releases it (failed work is free). Driven by the task log through a durable consumer, so a crash
 * anywhere replays the event; the ledger's decision (no open reservation → nothing to do) and the
 * cause-derived msgID make the replay charge nothing twice.
 */
export class Settlement {
  private readonly tasks: TaskLog;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly nats: Nats, private readonly ledger: AccountLedger, private readonly log: Logger) {
    this.tasks = new TaskLog(nats.js, nats.jsm);
  }

  async start(): Promise<void> {
    const consumer = await this.nats.js.consumers.get(STREAMS.tasks.name, CONSUMERS.settlement);
    this.loop = this.pull(consumer);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    await Promise.allSettled(this.inFlight);
  }

  private async pull(consumer: Consumer): Promise<void> {
    while (!this.stopped) {
      try {
        const batch = await consumer.fetch({ max_messages: 256, expires: 1000 });
        for await (const msg of batch) {
          const work = this.handle(msg).finally(() => this.inFlight.delete(work));
          this.inFlight.add(work);
        }
      } catch (error) {
        if (!this.stopped) this.log.warn({ err: error }, "settlement fetch failed; retrying");
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  private async handle(msg: JsMsg): Promise<void> {
    try {
      const event = TaskEvent.parse(msg.json());
      if (event.type === "GenerationSucceeded" || event.type === "GenerationFailed") await this.settle(event);
      msg.ack();
    } catch (error) {
      this.log.error({ err: error, seq: msg.seq }, "settling a task failed; retrying");
      msg.nak(1000);
    }
  }

  private async settle(event: Extract<TaskEvent, { type: "GenerationSucceeded" | "GenerationFailed" }>): Promise<void> {
    const taskId = event.meta.taskId;
    const { events } = await this.tasks.read(taskId);
    const submitted = events.find((e) => e.type === "TaskSubmitted");
    if (submitted?.type !== "TaskSubmitted") throw new Error(`task ${taskId} has no TaskSubmitted event`);
    const { account, job } = submitted.data;
    failpoint("settlement:before-append");
    if (event.type === "GenerationSucceeded") {
      const cost = costMicros([{ tokens: event.data.totalTokens, pricePerMillionTokens: job.pricePerMillionTokens }]);
      await this.ledger.execute(account, { type: "settle", taskId, costMicros: cost, totalTokens: event.data.totalTokens, model: job.model });
    } else {
      await this.ledger.execute(account, { type: "release", taskId, reason: event.data.reason });
    }
    failpoint("settlement:after-append");
  }
}
