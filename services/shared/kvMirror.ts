import { DeliverPolicy } from "@nats-io/jetstream";
import { BaseApiClientImpl } from "@nats-io/jetstream/internal";
import { Bucket, type KV, type KvEntry } from "@nats-io/kv";
import { feedClient, OrderedFeed } from "./liveFeed.ts";
import type { Logger } from "./log.ts";

export interface KvMirrorOptions<Value> {
  /** For logs and /healthz. */
  name: string;
  /** Key filter (e.g. "hash.>"); every key by default. */
  key?: string;
  /** Only changes from now on (a cache filled on demand) instead of every current value first. */
  updatesOnly?: boolean;
  /** Parses a stored value; a throw skips that entry (logged), it never ends the mirror. */
  decode: (entry: KvEntry) => Value;
  onPut: (key: string, value: Value) => void;
  onDelete: (key: string) => void;
  log: Logger;
}

/**
 * A KV bucket mirrored in memory by a live feed (liveFeed.ts) on the bucket's stream: every current value
 * first (or only updates), then each change in order. A lost consumer (its node gone, deleted) is noticed
 * within 1.5 s and replaced after the last change applied; while the mirror is behind, `healthy` is false
 * (which /healthz reports). One malformed record is logged and skipped; it never stops the updates behind it
 * (a revocation). `bucket.watch()` is not used: its consumer is made inside @nats-io/kv with a 5 s heartbeat
 * (30 s after its own reset) that cannot be changed, so a lost one went unnoticed for 10-90 s.
 */
export class KvMirror<Value> {
  private feed: OrderedFeed | undefined;

  constructor(
    private readonly bucket: KV,
    private readonly options: KvMirrorOptions<Value>,
  ) {}

  get healthy(): boolean {
    return this.feed !== undefined && this.feed.behindReason() === undefined;
  }

  get name(): string {
    return this.options.name;
  }

  /** Resolves once the first consumer is open. */
  async start(): Promise<void> {
    const { bucket, options } = this;
    // The buckets reelay opens are this class (Kvm.open); its stream and subject names are the package's own.
    if (!(bucket instanceof Bucket)) throw new Error(`${options.name}: a KV mirror needs a bucket opened with Kvm`);
    const subject = bucket.fullKeyName(options.key ?? ">");
    // Updates only: from the stream's end now; every value: the last of each key first, then what follows.
    const from = options.updatesOnly ? (await bucket.jsm.streams.info(bucket.stream)).state.last_seq : 0;
    // The bucket's own client waits 5 s for an API answer; the feed's waits 1 s (a new leader is found sooner).
    const js = bucket.js instanceof BaseApiClientImpl ? feedClient(bucket.js.nc) : bucket.js;
    const feed = new OrderedFeed({
      what: `${options.name} mirror`,
      log: options.log,
      from,
      open: (position) =>
        js.consumers.get(
          bucket.stream,
          position === 0 ? { filter_subjects: [subject], deliver_policy: DeliverPolicy.LastPerSubject } : { filter_subjects: [subject], deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: position + 1 },
        ),
      take: (msg) => this.apply(bucket.jmToWatchEntry(msg, true)),
    });
    this.feed = feed;
    await feed.start();
  }

  stop(): void {
    this.feed?.stop();
  }

  private apply(entry: KvEntry): void {
    if (entry.operation !== "PUT") {
      this.options.onDelete(entry.key);
      return;
    }
    try {
      this.options.onPut(entry.key, this.options.decode(entry));
    } catch (error) {
      this.options.log.error({ err: error, mirror: this.options.name, key: entry.key, revision: entry.revision }, "unreadable record in a KV mirror; skipped");
    }
  }
}
