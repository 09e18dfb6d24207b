import type { JsMsg } from "@nats-io/jetstream";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { deadLetterSubject } from "../../infra/jetstreamLayout.ts";
import type { KV } from "@nats-io/kv";
import type { z } from "zod";
import type { Logger } from "./log.ts";
import { startBatchReactor } from "./batchReactor.ts";
import type { Nats } from "./nats.ts";

/** An event arrived before the one it follows (several projector instances, or a redelivery): retry later. */
export class EventOutOfOrder extends Error {}

/** A read model: which events it folds, into which document key, and how. */
export interface Projection<Event, Doc> {
  name: string;
  /** The stream it folds, and the subjects of it that hold its events. */
  stream: string;
  subjects: readonly string[];
  /** The events one message holds (the ledger's group commits hold several). */
  decode: (raw: unknown) => readonly Event[];
  /** The document an event changes; undefined for events this read model ignores. */
  keyOf: (event: Event) => string | undefined;
  /** True for an event that creates its document (no read needed: the write is a create). */
  startsDocument?: (event: Event) => boolean;
  /** `sequence` is the event's stream sequence, for documents that record how far they are. */
  evolve: (doc: Doc | null, event: Event, sequence: number) => Doc | null;
  docSchema: z.ZodType<Doc>;
  /**
   * Whether a document is written to the bucket (absent: always). One that is not is only folded in memory
   * until it is; its readers fold it from the log themselves, and so does the runner after a restart.
   */
  persists?: (doc: Doc) => boolean;
  /**
   * Whether a written document is settled: later events change it rarely if ever (a final task's view, until
   * its video is deleted), so it is not kept in memory once written; such an event reads it back. Kept, every
   * task's final view stayed in memory until 50,000 later documents pushed it out.
   */
  settled?: (doc: Doc) => boolean;
}

interface CachedDoc<Doc> {
  doc: Doc | null;
  revision: number;
  /** False while `doc` is ahead of what the bucket holds (a document the projection does not write yet). */
  stored: boolean;
}

const CACHE_LIMIT = 50_000;
const NEW_DOC = { doc: null, revision: 0, stored: true } as const;

/**
 * Runs a projection from a durable consumer into a KV bucket, as a batch reactor: each batch's events are
 * grouped by document, documents are written in parallel (compare-and-set, so several instances can't
 * clobber each other), each once with all of its events folded in order. A batch is acknowledged once every
 * write is done; a crash or a failed write replays it, which the idempotent evolve absorbs.
 */
export class ProjectionRunner<Event, Doc> {
  private readonly cache = new Map<string, CachedDoc<Doc>>();
  /** Events held for a write behind, by document (see `holdEvents`). */
  private held = new Map<string, Array<{ event: Event; seq: number }>>();
  private reactor: { stop(): Promise<void> } | undefined;

  constructor(
    private readonly projection: Projection<Event, Doc>,
    private readonly nats: Nats,
    private readonly durable: string,
    private readonly bucket: KV,
    private readonly log: Logger,
    /** Passed to the batch reactor when this projection runs on a consumer of its own. */
    private readonly lingerMs?: number,
    /** Folds a document the bucket does not hold from the log (a projection whose `persists` says no to some). */
    private readonly unstored?: (key: string) => Promise<Doc | null>,
  ) {}

  async start(): Promise<void> {
    const { projection } = this;
    this.reactor = await startBatchReactor(this.nats, { stream: projection.stream, durable: this.durable, what: projection.name, log: this.log, handle: (batch) => this.handleBatch(batch), ...(this.lingerMs === undefined ? {} : { lingerMs: this.lingerMs }) });
  }

  async stop(): Promise<void> {
    await this.reactor?.stop();
  }

  /** Applies one batch (in stream order) and writes each changed document once. */
  async handleBatch(batch: readonly JsMsg[]): Promise<void> {
    const events: Array<{ event: Event; seq: number }> = [];
    const parked: Array<Promise<void>> = [];
    for (const msg of batch) {
      let decoded: readonly Event[];
      try {
        decoded = this.projection.decode(msg.json());
      } catch (error) {
        parked.push(parkUndecodable(this.nats, this.projection.name, msg, error, this.log));
        continue;
      }
      for (const event of decoded) events.push({ event, seq: msg.seq });
    }
    const results = await Promise.allSettled([...parked, this.handleEvents(events)]);
    const failed = results.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
  }

  /**
   * Like `handleEvents`, but each document's events are held and written together once per `behind`'s period:
   * the promise resolves once the events given here are kept (for a batch acknowledged only then).
   */
  holdEvents(events: ReadonlyArray<{ event: Event; seq: number }>, behind: { soon(): Promise<void>; last: Promise<void> }): Promise<void> {
    return this.groupByDocument(events, this.held) ? behind.soon() : behind.last;
  }

  /** Takes every document held by `holdEvents`, for the WriteBehind that writes them (again, until kept). */
  takeHeld(): () => Promise<void> {
    const held = this.held;
    this.held = new Map();
    return () => this.applyAll(held);
  }

  /** Applies events already decoded (in stream order), for a reactor that decodes once for several read models. */
  async handleEvents(events: ReadonlyArray<{ event: Event; seq: number }>): Promise<void> {
    const byKey = new Map<string, Array<{ event: Event; seq: number }>>();
    this.groupByDocument(events, byKey);
    await this.applyAll(byKey);
  }

  /** Adds each event this read model keeps to its document's list in `byKey`; whether any was added. */
  private groupByDocument(events: ReadonlyArray<{ event: Event; seq: number }>, byKey: Map<string, Array<{ event: Event; seq: number }>>): boolean {
    let added = false;
    for (const entry of events) {
      const key = this.projection.keyOf(entry.event);
      if (key === undefined) continue;
      const same = byKey.get(key);
      if (same) same.push(entry);
      else byKey.set(key, [entry]);
      added = true;
    }
    return added;
  }

  private async applyAll(byKey: ReadonlyMap<string, ReadonlyArray<{ event: Event; seq: number }>>): Promise<void> {
    const results = await Promise.allSettled([...byKey].map(([key, keyed]) => this.apply(key, keyed)));
    const failed = results.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
  }

  private async apply(key: string, events: ReadonlyArray<{ event: Event; seq: number }>, attempt = 1): Promise<void> {
    try {
      const first = events[0]?.event;
      // A document's first event needs no read: create() fails if it exists (a redelivery), then we read.
      const startsDocument = first !== undefined && this.projection.startsDocument?.(first) === true;
      const current = this.cache.get(key) ?? (startsDocument && attempt === 1 ? NEW_DOC : await this.load(key));
      let doc = current.doc;
      for (const { event, seq } of events) doc = this.projection.evolve(doc, event, seq);
      if (doc === null) return;
      if (this.projection.persists?.(doc) === false) {
        if (doc !== current.doc) this.remember(key, { doc, revision: current.revision, stored: false });
      } else if (doc !== current.doc || !current.stored) {
        const value = JSON.stringify(doc);
        const revision =
          current.revision === 0 ? await this.bucket.create(key, value) : await this.bucket.update(key, value, current.revision);
        if (this.projection.settled?.(doc) === true) this.cache.delete(key);
        else this.remember(key, { doc, revision, stored: true });
      }
    } catch (error) {
      this.cache.delete(key);
      if (attempt === 1) return this.apply(key, events, 2);
      throw error;
    }
  }

  private async load(key: string): Promise<CachedDoc<Doc>> {
    const entry = await this.bucket.get(key);
    if (entry?.operation === "PUT") return { doc: this.projection.docSchema.parse(entry.json()), revision: entry.revision, stored: true };
    const doc = (await this.unstored?.(key)) ?? null;
    return { doc, revision: entry?.revision ?? 0, stored: doc === null };
  }

  private remember(key: string, cached: CachedDoc<Doc>): void {
    this.cache.delete(key);
    this.cache.set(key, cached);
    if (this.cache.size > CACHE_LIMIT) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
  }
}

/**
 * Parks a message `reader` cannot decode on `deadletter.<reader>` (with its stream, sequence, subject and
 * error in headers) and logs it: an event nobody can read would otherwise stall the reader for good.
 */
export async function parkUndecodable(nats: Nats, reader: string, msg: JsMsg, error: unknown, log: Logger): Promise<void> {
  const reason = error instanceof Error ? error.message.slice(0, 2000) : String(error);
  log.error({ err: error, stream: msg.info.stream, seq: msg.seq }, `${reader}: undecodable event; parked on the dead-letter subject`);
  const headers = natsHeaders();
  headers.set("Reelay-Stream", msg.info.stream);
  headers.set("Reelay-Sequence", String(msg.seq));
  headers.set("Reelay-Subject", msg.subject);
  headers.set("Reelay-Error", reason.replace(/[\r\n]+/g, " "));
  // The msgID makes parking it again (the batch tried again, a crash) store it once.
  await nats.js.publish(deadLetterSubject(reader), msg.data, { headers, msgID: `${reader}-${msg.info.stream}-${msg.seq}` });
}
