import { setTimeout as sleep } from "node:timers/promises";
import { AckPolicy, type JsMsg } from "@nats-io/jetstream";
import { feedClient, LIVE_PULL, pinKeepingPull, watchDurablePull } from "./liveFeed.ts";
import type { Logger } from "./log.ts";
import type { Nats } from "./nats.ts";
import { tryUntilStopped } from "./retryPause.ts";
import { directMessages } from "./subjectLog.ts";

/** Messages handed to one call of `handle` at most. */
const MAX_BATCH = 512;
/** A batch's handling ended by a stop, not kept. */
const STOPPED: unique symbol = Symbol("stopped");
/**
 * With `ack_policy: all`, handled batches are acknowledged together at most this often: small batches come
 * one after another when events trickle in, and one acknowledgement covers them all. Far below any ack wait;
 * a crash before it only hands the last few batches over again.
 */
const ACK_EVERY_MS = 20;
/** How long after their ack wait older unacknowledged messages are surely due for redelivery. */
const OVERDUE_MARGIN_MS = 500;
/**
 * Messages after the ack floor whose order a new pull keeps (see `streamOrderAfterAckFloor`): more than a reader
 * ever holds unacknowledged (two batches in its buffer and one being handled).
 */
const ORDERED_AHEAD = 4 * MAX_BATCH;
/** How often a pull waiting for the next message in stream order looks again, at most. */
const ORDER_POLL_MS = 100;
const bySeq = (a: JsMsg, b: JsMsg) => a.seq - b.seq;

export interface BatchReactorOptions {
  stream: string;
  durable: string;
  what: string;
  log: Logger;
  /**
   * Handles the messages that arrived since the last call, in stream order. Throwing hands the same batch
   * over again after a pause, so it must be idempotent (a crash redelivers it too); nothing after it is
   * handled meanwhile. The reactor acknowledges the batch once this resolves, or, when it answers with a
   * `durable` promise (its effects are written behind), once that resolves: in order, never past a batch
   * whose writes are not kept yet.
   */
  handle: (batch: readonly JsMsg[]) => Promise<void | WrittenBehind>;
  /**
   * Batches start at most this often (a batch that fills up goes at once). A read model whose readers can
   * wait that long folds more events of one document into one write: a short task's whole life, say.
   */
  lingerMs?: number;
}

/** A batch handled, whose effects are kept once `durable` resolves (a rejection: never acknowledged here). */
export interface WrittenBehind {
  durable: Promise<void>;
}

/**
 * Several handlers' work on one batch, as one: kept once all of theirs is. The batch fails with the first handler
 * that failed; what the others write behind is then moot (the batch is handed over again), and its failure (a
 * write given up while stopping, say) is handled here: left unhandled, it ended the process.
 */
export async function handledTogether(work: ReadonlyArray<Promise<void | WrittenBehind> | WrittenBehind>): Promise<WrittenBehind> {
  const results = await Promise.allSettled(work);
  const durable = results.flatMap((result) => (result.status === "fulfilled" && result.value ? [result.value.durable] : []));
  const failed = results.find((result): result is PromiseRejectedResult => result.status === "rejected");
  if (failed) {
    for (const written of durable) written.catch(() => undefined);
    throw failed.reason;
  }
  return { durable: Promise.all(durable).then(() => undefined) };
}

/**
 * A reactor on one durable consumer that handles its messages in batches, one batch at a time in stream
 * order: what folds many events into one write (counters, indexes, views) and acknowledges them together.
 *
 * On a consumer with `ack_policy: all` one acknowledgement per batch covers it (the layout makes reactor
 * consumers so, with a pinned-client priority group: one process reads at a time, another takes over when
 * it stops pulling, so no other process's messages are ever acknowledged with ours). A consumer made by an
 * older reelay (explicit acks, no group) still works: every message is acknowledged on its own.
 */
export async function startBatchReactor(nats: Nats, options: BatchReactorOptions): Promise<{ stop(): Promise<void> }> {
  // Its info calls (nats.js asks for it after a loss) time out soon, so a new leader is found soon after it is elected.
  const consumer = await feedClient(nats.nc).consumers.get(options.stream, options.durable);
  const { config } = await consumer.info(true);
  const ackAll = config.ack_policy === AckPolicy.All;
  const ackWaitMs = (config.ack_wait ?? 30e9) / 1e6;
  /** Set at each new pull: its first batch is handled only once nothing older waits unacknowledged. */
  let firstOfPull = false;
  /** A pull backed off for older messages (see `streamOrderAfterAckFloor`) starts again no sooner than this. */
  let resumeAt = 0;
  /** Whether the pull before this one was given up for older messages: they are due now, so this one is not. */
  let backedOff = false;
  /**
   * At a pull's start, the sequences after the ack floor in stream order: until they are handled, batches are
   * taken only as their next run, so nothing is handled (and acknowledged) ahead of an older message.
   */
  let ordered: number[] | undefined;
  let orderedSince = 0;
  let currentPull: { stop(): void } | undefined;
  const group = config.priority_policy === "pinned_client" ? config.priority_groups?.[0] : undefined;
  const pull = group === undefined ? LIVE_PULL : pinKeepingPull((config.priority_timeout ?? 0) / 1e6);
  const stopping = new AbortController();
  const buffer: JsMsg[] = [];
  /** Resolves the worker's wait for messages, and the pull's wait for room; `stop` resolves both. */
  let wake: (() => void) | undefined;
  let drained: (() => void) | undefined;
  /** Lets the pull go on after the buffer was taken from (a function: the pull sets `drained` while the worker awaits). */
  const unblockPull = () => {
    drained?.();
    drained = undefined;
  };

  // One long-lived pull (consume), not a fetch per batch: the client keeps the pin id it was given only
  // for the life of one pull, and a fetch without it is refused while the pin lasts.
  const loop = (async () => {
    while (!stopping.signal.aborted) {
      try {
        const pause = resumeAt - performance.now();
        if (pause > 0) await sleep(pause, undefined, { signal: stopping.signal }).catch(() => undefined);
        if (stopping.signal.aborted) break;
        // Heartbeats every 0.5 s: a consumer lost under the pull (its node gone) is asked for again after 1-1.5 s.
        const messages = await consumer.consume({ ...pull, max_messages: MAX_BATCH, ...(group ? { group } : {}) });
        currentPull = messages;
        firstOfPull = ackAll;
        watchDurablePull(messages, options.what, options.log);
        const stopPull = () => void messages.stop();
        stopping.signal.addEventListener("abort", stopPull, { once: true });
        try {
          for await (const msg of messages) {
            // A pull given up for older messages (see the worker): what it still brings comes again later, in order.
            if (currentPull !== messages) break;
            buffer.push(msg);
            wake?.();
            // Backpressure: no more pulls while the worker is two batches behind.
            while (buffer.length >= 2 * MAX_BATCH && !stopping.signal.aborted) await new Promise<void>((resolve) => (drained = resolve));
            if (stopping.signal.aborted) break;
          }
        } finally {
          stopping.signal.removeEventListener("abort", stopPull);
        }
      } catch (error) {
        if (!stopping.signal.aborted) options.log.warn({ err: error }, `${options.what}: pull failed; retrying`);
        await sleep(500, undefined, { signal: stopping.signal }).catch(() => undefined);
      }
    }
  })();

  let unacknowledged: JsMsg | undefined;
  let ackTimer: NodeJS.Timeout | undefined;
  const flushAck = () => {
    clearTimeout(ackTimer);
    ackTimer = undefined;
    unacknowledged?.ack();
    unacknowledged = undefined;
  };
  /** The messages whose acknowledgement covers `batch`: with `ack_policy: all`, its last alone. */
  const acknowledging = (batch: readonly JsMsg[]): readonly JsMsg[] => (ackAll ? batch.slice(-1) : batch);
  const acknowledge = (messages: readonly JsMsg[]) => {
    if (!ackAll) {
      for (const msg of messages) msg.ack();
      return;
    }
    unacknowledged = messages.at(-1) ?? unacknowledged;
    ackTimer ??= setTimeout(flushAck, ACK_EVERY_MS);
  };

  /**
   * Batches are acknowledged in order, each once it is kept; after one that will not be, none is. Until then
   * only what its acknowledgement needs is held: a written-behind batch waits up to a second, and holding every
   * message of it (with its raw bytes and headers) kept a second's worth of messages alive for nothing.
   */
  let kept: Promise<void> = Promise.resolve();
  let keepingFailed = false;
  const acknowledgeWhenKept = (batch: readonly JsMsg[], durable: Promise<void> | undefined) => {
    const messages = acknowledging(batch);
    const firstSeq = batch[0]?.seq;
    kept = Promise.all([kept, durable]).then(
      () => {
        if (!keepingFailed) acknowledge(messages);
      },
      (error: unknown) => {
        if (!keepingFailed) options.log.warn({ err: error, firstSeq }, `${options.what}: a batch's writes were not kept; it will be handed over again`);
        keepingFailed = true;
      },
    );
  };

  const work = (async () => {
    let lastBatchAt = 0;
    while (!stopping.signal.aborted) {
      if (buffer.length === 0) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      const lingering = (options.lingerMs ?? 0) - (performance.now() - lastBatchAt);
      if (lingering > 0 && buffer.length < MAX_BATCH) {
        await sleep(lingering, undefined, { signal: stopping.signal }).catch(() => undefined);
        continue;
      }
      if (firstOfPull) {
        firstOfPull = false;
        // Our own earlier batches' acknowledgements reach the server first (one connection, in order).
        await kept;
        flushAck();
        // Once given up, a pull is not given up again: what was older is due by now (and an order that cannot be
        // read, NATS failing, must not hold the reactor forever).
        ordered = backedOff ? undefined : await streamOrderAfterAckFloor(nats, options.stream, options.durable).catch(() => undefined);
        orderedSince = performance.now();
        backedOff = false;
      }
      let batch: JsMsg[];
      if (ordered !== undefined && ordered.length > 0) {
        const run = nextRun(buffer, ordered);
        if (run.length === 0) {
          // The next message in stream order has not come: handed to an earlier reader, it comes back once its ack
          // wait is over. Newer ones wait for it; past its due time (or with no room left) the pull is given up.
          if (performance.now() - orderedSince < ackWaitMs + OVERDUE_MARGIN_MS && buffer.length < 2 * MAX_BATCH) {
            await Promise.race([new Promise<void>((resolve) => (wake = resolve)), sleep(ORDER_POLL_MS, undefined, { signal: stopping.signal }).catch(() => undefined)]);
            wake = undefined;
            continue;
          }
          options.log.warn({ next: ordered[0], waitMs: ackWaitMs }, `${options.what}: an older message, handed to an earlier reader, has not come back; pulling again once it is due`);
          ordered = undefined;
          backedOff = true;
          buffer.length = 0;
          unblockPull();
          resumeAt = performance.now() + ackWaitMs + OVERDUE_MARGIN_MS;
          const pull = currentPull;
          currentPull = undefined;
          pull?.stop();
          continue;
        }
        ordered = ordered.slice(run.length);
        batch = run;
      } else {
        batch = buffer.splice(0, MAX_BATCH).sort(bySeq);
      }
      lastBatchAt = performance.now();
      unblockPull();
      const handled = await tryUntilStopped(
        () => options.handle(batch),
        stopping.signal,
        (error, attempt) => options.log.warn({ err: error, attempt, firstSeq: batch[0]?.seq, messages: batch.length }, `${options.what}: batch failed; trying it again`),
      ).catch((): typeof STOPPED => STOPPED);
      // Stopping leaves the batch unacknowledged: it is delivered again, here or to another process.
      if (handled === STOPPED) return;
      acknowledgeWhenKept(batch, handled ? handled.durable : undefined);
    }
  })();

  return {
    stop: async () => {
      stopping.abort();
      wake?.();
      drained?.();
      await loop;
      await work;
      await kept;
      flushAck();
    },
  };
}

/**
 * The consumer's next messages in stream order: the sequences of the first ORDERED_AHEAD messages of its filter
 * after its ack floor. Some may have been handed to an earlier reader (a process that died, or this one before
 * its pull was renewed) and not acknowledged: the server redelivers those only after their ack wait and hands
 * a new reader newer messages first (measured on 2.15.1, after a takeover of the pin and after a restart).
 * Handled first, one acknowledgement (`ack_policy: all`) would cover the older ones unhandled, and read models
 * that keep the last sequence they folded would skip them.
 */
async function streamOrderAfterAckFloor(nats: Nats, stream: string, durable: string): Promise<number[]> {
  const { ack_floor, config } = await nats.jsm.consumers.info(stream, durable);
  const filters = config.filter_subjects?.length ? config.filter_subjects : [config.filter_subject ?? ">"];
  const seqs: number[] = [];
  for (const filter of filters) {
    for await (const msg of directMessages(() => nats.jsm.direct.getBatch(stream, { seq: ack_floor.stream_seq + 1, next_by_subj: filter, batch: ORDERED_AHEAD }))) seqs.push(msg.seq);
  }
  return seqs.sort((a, b) => a - b).slice(0, ORDERED_AHEAD);
}

/**
 * Takes from `buffer` the messages that are next in stream order (`ordered`'s first sequences, as many as are
 * there in a row, a batch at most), dropping repeats of one message (a redelivery of what is held); none when the
 * next one has not come.
 */
function nextRun(buffer: JsMsg[], ordered: readonly number[]): JsMsg[] {
  buffer.sort(bySeq);
  const run: JsMsg[] = [];
  const rest: JsMsg[] = [];
  for (const msg of buffer) {
    const last = run.at(-1);
    if (last !== undefined && msg.seq === last.seq) run[run.length - 1] = msg;
    else if (run.length < MAX_BATCH && rest.length === 0 && msg.seq === ordered[run.length]) run.push(msg);
    else rest.push(msg);
  }
  buffer.splice(0, buffer.length, ...rest);
  return run;
}
