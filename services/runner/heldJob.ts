import type { JsMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";

// JetStream's acknowledgement protocol, byte for byte as nats.js's JsMsg sends it.
const ACK = Uint8Array.of(43, 65, 67, 75); // +ACK
const NAK = Uint8Array.of(45, 78, 65, 75); // -NAK
const WORKING = Uint8Array.of(43, 87, 80, 73); // +WPI

/**
 * A job the runner holds while its task lives (the task's first event, or a job an older edge queued), kept
 * as the delivery's reply subject only. A JsMsg keeps its payload, its headers and the read buffer they were
 * cut from alive for the task's whole life: about 1.3 KB per task, and a runner holds thousands. Answers as
 * the JsMsg would: heartbeats any number of times, then one final ack or nak; later ones are not sent.
 */
export class HeldJob {
  /** When its next heartbeat is due (performance.now()). */
  beatDue = 0;
  private answered = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly reply: string,
  ) {}

  static of(nc: NatsConnection, msg: JsMsg): HeldJob {
    // The client's JsMsg has a `reply` getter its interface does not declare (@nats-io/jetstream is pinned;
    // test/heldJob.int.spec.ts fails if that changes).
    const { reply } = msg as JsMsg & { reply?: unknown };
    if (typeof reply !== "string" || !reply.startsWith("$JS.ACK.")) throw new TypeError(`a JetStream delivery without an ack subject: ${String(reply)}`);
    return new HeldJob(nc, reply);
  }

  /** Extends the lease (the consumer's ack wait) from now. */
  working(): void {
    if (!this.answered) this.nc.publish(this.reply, WORKING);
  }

  ack(): void {
    this.answer(ACK);
  }

  /** Hands the job back, to be delivered again after `delayMs` (at once without it). */
  nak(delayMs?: number): void {
    this.answer(delayMs ? new TextEncoder().encode(`-NAK ${JSON.stringify({ delay: delayMs * 1_000_000 })}`) : NAK);
  }

  private answer(payload: Uint8Array): void {
    if (this.answered) return;
    this.answered = true;
    this.nc.publish(this.reply, payload);
  }
}

/**
 * The jobs a runner holds, by task id, with their heartbeats: each job's lease is renewed a third of a lease
 * after it was last renewed, so a live runner never loses a task it is working on.
 */
export class HeldJobs extends Map<number, HeldJob> {
  constructor(private readonly leaseMs: number) {
    super();
  }

  get beatEveryMs(): number {
    return Math.max(100, Math.floor(this.leaseMs / 3));
  }

  /** Holds `job` for `taskId`, its lease just renewed (delivered, or heartbeated, now). */
  hold(taskId: number, job: HeldJob): void {
    this.set(taskId, job);
    job.beatDue = performance.now() + this.beatEveryMs;
  }

  /** Heartbeats the held jobs that are due (all of them with `all`). */
  beat(all = false): void {
    const now = performance.now();
    for (const job of this.values()) {
      if (!all && job.beatDue > now) continue;
      job.working();
      job.beatDue = now + this.beatEveryMs;
    }
  }
}
