import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "./log.ts";
import { retryPauseMs } from "./retryPause.ts";

/** While stopping, a write that keeps failing is given up after this many attempts (not acknowledged: handled again elsewhere). */
const ATTEMPTS_WHILE_STOPPING = 3;

/**
 * When a read model's pending changes are written: `quietMs` after the last batch that brought changes, and at
 * the latest `periodMs` after the first of them, however many batches keep arriving (a busy log is written once
 * per period, an isolated change soon after it); one write after another (a later write never passes an
 * earlier one being tried again). Reactors answer
 * a batch with `soon()`, the promise of the write that will keep its changes, and the batch is acknowledged
 * only once that resolves (services/shared/batchReactor.ts: WrittenBehind). A write that fails is tried again
 * with back-off until kept: a write given up would leave the reactor unable to acknowledge anything after it.
 */
export class WriteBehind {
  /** The write the pending changes wait for, once one is due, and the latest it starts (performance.now()). */
  private due: { written: Promise<void>; start: () => void; latest: number } | undefined;
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(
    private readonly periodMs: number,
    /** Takes everything pending at that moment; the write it answers may be called again until it is kept. */
    private readonly takePending: () => () => Promise<void>,
    private readonly log: Logger,
    private readonly what: string,
    private readonly quietMs = periodMs,
  ) {}

  /**
   * The write of the changes pending now (a batch just brought some): started `quietMs` after the last such
   * call, at most `periodMs` after the first; at once when stopping.
   */
  soon(): Promise<void> {
    if (this.due) {
      this.startWhenQuiet(this.due);
      return this.due.written;
    }
    let start!: () => void;
    const startNow = new Promise<void>((resolve) => (start = resolve));
    const written = startNow.then(() => {
      clearTimeout(this.timer);
      this.due = undefined;
      const write = this.takePending();
      this.writing = this.writing.catch(() => undefined).then(() => this.keep(write));
      return this.writing;
    });
    this.due = { written, start, latest: performance.now() + this.periodMs };
    if (this.stopping) start();
    else this.startWhenQuiet(this.due);
    return written;
  }

  private startWhenQuiet(due: NonNullable<WriteBehind["due"]>): void {
    if (this.stopping) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(due.start, Math.max(0, Math.min(this.quietMs, due.latest - performance.now())));
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
        await sleep(retryPauseMs(attempt));
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
