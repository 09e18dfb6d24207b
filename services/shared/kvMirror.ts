import { setTimeout as sleep } from "node:timers/promises";
import { KvWatchInclude, type KV, type KvEntry } from "@nats-io/kv";
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
 * A KV bucket mirrored in memory by a watch that does not die: if the watch ends or fails, the mirror
 * says so (`healthy` is false, which /healthz reports) and starts a new watch with growing pauses.
 * One malformed record is logged and skipped; it never stops the updates behind it (a revocation).
 */
export class KvMirror<Value> {
  private stopped = false;
  private healthyNow = false;
  private current: { stop(): void } | undefined;

  constructor(
    private readonly bucket: KV,
    private readonly options: KvMirrorOptions<Value>,
    /** How the watch is opened; tests replace it to make it fail. */
    private readonly openWatch: (bucket: KV, options: KvMirrorOptions<Value>) => ReturnType<KV["watch"]> = defaultWatch,
  ) {}

  get healthy(): boolean {
    return this.healthyNow;
  }

  get name(): string {
    return this.options.name;
  }

  /** Resolves once the first watch is open. */
  async start(): Promise<void> {
    const first = await this.openWatch(this.bucket, this.options);
    void this.run(first);
  }

  stop(): void {
    this.stopped = true;
    this.current?.stop();
  }

  private async run(first: Awaited<ReturnType<KV["watch"]>>): Promise<void> {
    let watch: Awaited<ReturnType<KV["watch"]>> | undefined = first;
    for (let failures = 0; !this.stopped; ) {
      try {
        watch ??= await this.openWatch(this.bucket, this.options);
        this.current = watch;
        this.healthyNow = true;
        failures = 0;
        for await (const entry of watch) this.apply(entry);
        if (this.stopped) return;
        throw new Error("the watch ended");
      } catch (error) {
        if (this.stopped) return;
        this.healthyNow = false;
        failures++;
        const pause = Math.min(30_000, 250 * 2 ** Math.min(failures, 7)) * (0.5 + Math.random() / 2);
        this.options.log.error({ err: error, mirror: this.options.name, retryInMs: Math.round(pause) }, "KV mirror lost its watch; restarting it");
        watch = undefined;
        await sleep(pause);
      }
    }
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

function defaultWatch<Value>(bucket: KV, options: KvMirrorOptions<Value>): ReturnType<KV["watch"]> {
  return bucket.watch({
    ...(options.key === undefined ? {} : { key: options.key }),
    ...(options.updatesOnly ? { include: KvWatchInclude.UpdatesOnly } : {}),
  });
}
