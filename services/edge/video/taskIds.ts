import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { headers, type MsgHdrs } from "@nats-io/transport-node";
import { z } from "zod";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";

/** Ids an edge takes at once: one counter write per this many creates. An edge that stops leaves the rest unused. */
export const TASK_ID_BLOCK = 64;
const CounterValue = z.object({ val: z.string().regex(/^\d+$/) });

/**
 * Hands out task ids, unique across every edge and never reused: a block at a time from the counter
 * `TASK_ID_COUNTER` (the edge adds TASK_ID_BLOCK and owns the ids up to the value it gets back), so a create
 * costs no NATS round trip for its id. Ids grow with time on each edge; across edges they interleave by block.
 */
export class TaskIdAllocator {
  private next = 1;
  private end = 0;
  private refill: Promise<void> | undefined;

  constructor(private readonly js: JetStreamClient) {}

  async take(): Promise<number> {
    while (this.next > this.end) {
      this.refill ??= this.takeBlock().finally(() => (this.refill = undefined));
      await this.refill;
    }
    return this.next++;
  }

  private async takeBlock(): Promise<void> {
    const last = await this.add(TASK_ID_BLOCK);
    [this.next, this.end] = [last - TASK_ID_BLOCK + 1, last];
  }

  private async add(amount: number): Promise<number> {
    const ack: unknown = await this.js.publish(STREAMS.taskIdCounter.subjects[0], undefined, { headers: counterIncrement(amount) });
    return Number(CounterValue.parse(ack).val);
  }
}

/** The headers that add `amount` to a counter subject (nats-server 2.12+ `allow_msg_counter`). */
export function counterIncrement(amount: number): MsgHdrs {
  const incr = headers();
  incr.set("Nats-Incr", `+${amount}`);
  return incr;
}

/** The newest task id handed out so far, by any edge (blocks included: some of the newest may never be used). */
export async function newestTaskId(jsm: JetStreamManager): Promise<number> {
  const counter = await jsm.direct.getMessage(STREAMS.taskIdCounter.name, { last_by_subj: STREAMS.taskIdCounter.subjects[0] });
  return counter ? Number(CounterValue.parse(counter.json()).val) : 0;
}
