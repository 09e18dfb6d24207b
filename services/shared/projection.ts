import type { Consumer, JetStreamClient, JsMsg } from "@nats-io/jetstream";
import { headers as natsHeaders } from "@nats-io/transport-node";
import { deadLetterSubject } from "../../infra/jetstreamLayout.ts";
import type { KV } from "@nats-io/kv";
import type { z } from "zod";
import type { Logger } from "./log.ts";
import { pullLoop } from "./pullLoop.ts";

/** An event arrived before the one it follows (several projector instances, or a redelivery): retry later. */
export class EventOutOfOrder extends Error {}

/** A read model: which events it folds, into which document key, and how. */
export interface Projection<Event, Doc> {
  name: string;
  /** The stream it folds. */
  stream: string;
  decode: (raw: unknown) => Event;
  /** The document an event changes; undefined for events this read model ignores. */
  keyOf: (event: Event) => string | undefined;
  /** True for an event that creates its document (no read needed: the write is a create). */
  startsDocument?: (event: Event) => boolean;
  /** `sequence` is the event's stream sequence, for documents that record how far they are. */
  evolve: (doc: Doc | null, event: Event, sequence: number) => Doc | null;
  docSchema: z.ZodType<Doc>;
}

interface CachedDoc<Doc> {
  doc: Doc | null;
  revision: number;
}

const CACHE_LIMIT = 50_000;
const NEW_DOC = { doc: null, revision: 0 } as const;

/**
 * Runs a projection from a durable pull consumer into a KV bucket: explicit acks (a crash replays
 * unacked events, which the idempotent evolve absorbs), compare-and-set writes (several instances can't
 * clobber each other), events for different documents in parallel, events for one document in order —
 * and those that arrive while the document's previous write is in flight are folded into one write.
 */
export class ProjectionRunner<Event, Doc> {
  private readonly cache = new Map<string, CachedDoc<Doc>>();
  /** Events waiting for their document, per key, and the drain working through each key. */
  private readonly pending = new Map<string, Array<{ event: Event; msg: JsMsg }>>();
  private readonly draining = new Map<string, Promise<void>>();
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(
    private readonly projection: Projection<Event, Doc>,
    private readonly consumer: Consumer,
    private readonly bucket: KV,
    private readonly log: Logger,
    /** Where undecodable events are parked (stream DEAD_LETTERS). */
    private readonly deadLetters: JetStreamClient,
  ) {}

  start(): void {
    this.loop = pullLoop(this.consumer, {
      signal: this.stopping.signal,
      room: () => 512,
      take: (msg) => this.enqueue(msg),
      log: this.log,
      what: this.projection.name,
    });
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    await Promise.allSettled(this.draining.values());
  }

  private enqueue(msg: JsMsg): void {
    let event: Event;
    try {
      event = this.projection.decode(msg.json());
    } catch (error) {
      // An event we cannot read would block this document forever: park it for an operator, move on.
      void this.deadLetter(msg, error);
      return;
    }
    const key = this.projection.keyOf(event);
    if (key === undefined) {
      msg.ack();
      return;
    }
    const queued = this.pending.get(key);
    if (queued) queued.push({ event, msg });
    else this.pending.set(key, [{ event, msg }]);
    if (!this.draining.has(key)) this.draining.set(key, this.drain(key));
  }

  private async deadLetter(msg: JsMsg, error: unknown): Promise<void> {
    const reason = error instanceof Error ? error.message.slice(0, 2000) : String(error);
    this.log.error({ err: error, stream: msg.info.stream, seq: msg.seq }, `${this.projection.name}: undecodable event; parked on the dead-letter subject`);
    const headers = natsHeaders();
    headers.set("Reelay-Stream", msg.info.stream);
    headers.set("Reelay-Sequence", String(msg.seq));
    headers.set("Reelay-Subject", msg.subject);
    headers.set("Reelay-Error", reason.replace(/[\r\n]+/g, " "));
    try {
      await this.deadLetters.publish(deadLetterSubject(this.projection.name), msg.data, { headers, msgID: `${this.projection.name}-${msg.info.stream}-${msg.seq}` });
      msg.ack();
    } catch (publishError) {
      this.log.warn({ err: publishError, seq: msg.seq }, "could not park the undecodable event; will try again");
      msg.nak(1000);
    }
  }

  private async drain(key: string): Promise<void> {
    for (let batch = this.take(key); batch.length > 0; batch = this.take(key)) await this.apply(key, batch);
    // Synchronous with the empty take: an event enqueued after this starts a new drain.
    this.draining.delete(key);
  }

  private take(key: string): Array<{ event: Event; msg: JsMsg }> {
    const batch = this.pending.get(key) ?? [];
    this.pending.delete(key);
    return batch;
  }

  private async apply(key: string, batch: Array<{ event: Event; msg: JsMsg }>, attempt = 1): Promise<void> {
    try {
      const first = batch[0]?.event;
      // A document's first event needs no read: create() fails if it exists (a redelivery), then we read.
      const startsDocument = first !== undefined && this.projection.startsDocument?.(first) === true;
      const current = this.cache.get(key) ?? (startsDocument && attempt === 1 ? NEW_DOC : await this.load(key));
      let doc = current.doc;
      for (const { event, msg } of batch) doc = this.projection.evolve(doc, event, msg.seq);
      if (doc !== current.doc && doc !== null) {
        const value = JSON.stringify(doc);
        const revision =
          current.revision === 0 ? await this.bucket.create(key, value) : await this.bucket.update(key, value, current.revision);
        this.remember(key, { doc, revision });
      }
      for (const { msg } of batch) msg.ack();
    } catch (error) {
      this.cache.delete(key);
      if (attempt === 1) return this.apply(key, batch, 2);
      this.log.debug({ err: error, key }, `${this.projection.name}: retrying events later`);
      for (const { msg } of batch) msg.nak(200);
    }
  }

  private async load(key: string): Promise<CachedDoc<Doc>> {
    const entry = await this.bucket.get(key);
    if (!entry || entry.operation !== "PUT") return { doc: null, revision: entry?.revision ?? 0 };
    return { doc: this.projection.docSchema.parse(entry.json()), revision: entry.revision };
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
