import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { z } from "zod";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";

/** Ids an edge takes at once: one counter write per this many creates. An edge that stops leaves the rest unused. */
export const TASK_ID_BLOCK = 64;
/**
 * Where blocks start above the last id an older reelay handed out (stream TASK_IDS): room for the creates
 * older edges still make while a deployment moves over, so their ids and the blocks never meet.
 */
export const LEGACY_ID_MARGIN = 1_000_000;

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
  private legacyFloorValue: number | undefined;

  constructor(private readonly js: JetStreamClient, private readonly jsm: JetStreamManager) {}

  async take(): Promise<number> {
    while (this.next > this.end) {
      this.refill ??= this.takeBlock().finally(() => (this.refill = undefined));
      await this.refill;
    }
    return this.next++;
  }

  private async takeBlock(): Promise<void> {
    let size = TASK_ID_BLOCK;
    for (;;) {
      const last = await this.add(size);
      const first = last - TASK_ID_BLOCK + 1;
      const floor = await this.legacyFloor();
      if (first > floor) {
        [this.next, this.end] = [first, last];
        return;
      }
      // The counter is new on a store an older reelay used: move it past that reelay's ids first.
      size = floor - last + TASK_ID_BLOCK;
    }
  }

  private async add(amount: number): Promise<number> {
    const incr = headers();
    incr.set("Nats-Incr", `+${amount}`);
    const ack: unknown = await this.js.publish(STREAMS.taskIdCounter.subjects[0], undefined, { headers: incr });
    return Number(CounterValue.parse(ack).val);
  }

  /** Above every id an older reelay gave out, with room for the ones it may still give out (0 on a new store). */
  private async legacyFloor(): Promise<number> {
    if (this.legacyFloorValue === undefined) {
      const last = await legacyLastId(this.jsm);
      this.legacyFloorValue = last === 0 ? 0 : last + LEGACY_ID_MARGIN;
    }
    return this.legacyFloorValue;
  }
}

/** The newest task id handed out so far, by any edge (blocks included: some of the newest may never be used). */
export async function newestTaskId(jsm: JetStreamManager): Promise<number> {
  const counter = await jsm.direct.getMessage(STREAMS.taskIdCounter.name, { last_by_subj: STREAMS.taskIdCounter.subjects[0] });
  const value = counter ? Number(CounterValue.parse(counter.json()).val) : 0;
  return Math.max(value, await legacyLastId(jsm));
}

async function legacyLastId(jsm: JetStreamManager): Promise<number> {
  return (await jsm.streams.info(STREAMS.taskIds.name)).state.last_seq;
}
