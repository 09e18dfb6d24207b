import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "./log.ts";

/** While stopping, a write that keeps failing is given up after this many attempts (not acknowledged: handled again elsewhere). */
const ATTEMPTS_WHILE_STOPPING = 3;

/**
 * When a read model's pending changes are written: once per `periodMs`, however many batches arrive in between,
 * one write after another (a later write never passes an earlier one being tried again). Reactors answer
 * a batch with `soon()`, the promise of the write that will keep its changes, and the batch is acknowledged
 * only once that resolves (services/shared/batchReactor.ts: WrittenBehind). A write that fails is tried again
 * with back-off until kept: a write given up would leave the reactor unable to acknowledge anything after it.
 */
export class WriteBehind {
  /** The write the pending changes wait for, once one is due. */
  private due: { written: Promise<void>; start: () => void } | undefined;
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(
    private readonly periodMs: number,
    /** Takes everything pending at that moment; the write it answers may be called again until it is kept. */
    private readonly takePending: () => () => Promise<void>,
    private readonly log: Logger,
    private readonly what: string,
  ) {}

  /** The write of the changes pending now: started `periodMs` after the first of them, at once when stopping. */
  soon(): Promise<void> {
    if (this.due) return this.due.written;
    let start!: () => void;
    const startNow = new Promise<void>((resolve) => (start = resolve));
    const written = startNow.then(() => {
      clearTimeout(this.timer);
      this.due = undefined;
      const write = this.takePending();
      this.writing = this.writing.catch(() => undefined).then(() => this.keep(write));
      return this.writing;
    });
    this.due = { written, start };
    if (this.stopping) start();
    else this.timer = setTimeout(start, this.periodMs);
    return written;
  }

  /** The last write started (for a batch with nothing new to keep: it is kept once what came before is). */
  get last(): Promise<void> {
    return this.writing;
  }


  private async keep(write: () => Promise<void>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (error) {
        if (this.stopping && attempt >= ATTEMPTS_WHILE_STOPPING) throw error;
        this.log.warn({ err: error, attempt }, `${this.what} not written; trying again`);
        await sleep(Math.min(5_000, 100 * 2 ** attempt));
      }
    }
  }

  /** Writes what is pending at once and stops holding changes back (a write that keeps failing is then given up). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.due?.start();
    await this.writing.catch(() => undefined);
  }
}
