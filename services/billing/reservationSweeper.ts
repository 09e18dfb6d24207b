import { AccountBalance } from "../../contracts/ledger.ts";
import { taskHasTrace } from "../shared/taskTrace.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import type { AccountLedger } from "./accountLedger.ts";

/**
 * Frees money held by a reservation whose task never came to be: an edge that died between reserving and
 * writing the task's first event (a window of milliseconds). A reservation is an orphan when its task has
 * no first event on TASKS (nor, on a store an older reelay used, a job on WORK); it is released only when
 * found so on two sweeps in a row, so a create that is between those two steps right now is never touched.
 */
export class ReservationSweeper {
  private round = 0;
  /** `account task` → the round it was first seen without a trace. */
  private readonly suspects = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;

  constructor(
    private readonly nats: Nats,
    private readonly ledger: AccountLedger,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.sweeping ??= this.sweep()
        .catch((error: unknown) => this.log.warn({ err: error }, "reservation sweep failed; next round retries"))
        .finally(() => (this.sweeping = undefined));
    }, this.intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
  }

  private async sweep(): Promise<void> {
    this.round += 1;
    const seen = new Set<string>();
    for await (const account of await this.nats.balances.keys()) {
      const entry = await this.nats.balances.get(account);
      if (!entry || entry.operation !== "PUT" || AccountBalance.parse(entry.json()).openReservations === 0) continue;
      const state = await this.ledger.current(account);
      for (const taskId of [...state.reservations.keys()]) {
        if (await taskHasTrace(this.nats.jsm, taskId)) continue;
        const suspect = `${account} ${taskId}`;
        seen.add(suspect);
        const firstSeen = this.suspects.get(suspect) ?? this.round;
        this.suspects.set(suspect, firstSeen);
        if (firstSeen < this.round) {
          this.log.warn({ account, taskId }, "releasing the reservation of a task that was never queued");
          await this.ledger.execute(account, { type: "release", taskId, reason: "the task was never queued" });
        }
      }
    }
    for (const suspect of this.suspects.keys()) if (!seen.has(suspect)) this.suspects.delete(suspect);
  }
}
