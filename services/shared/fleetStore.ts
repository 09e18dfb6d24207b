import { JetStreamApiError, type JetStreamClient } from "@nats-io/jetstream";
import type { KV, KvEntry } from "@nats-io/kv";
import { FLEET_BUCKET, ttlOf } from "../../contracts/fleet.ts";
import { ConcurrencyError } from "./errors.ts";
import { KvMirror } from "./kvMirror.ts";
import type { Logger } from "./log.ts";

const WRONG_LAST_SEQUENCE = 10071;

/** A record as last seen, with the revision a guarded write of it must expect. */
export interface Versioned {
  revision: number;
  value: unknown;
}

/**
 * The fleet's shared records (bucket `fleet`, contracts/fleet.ts): writes with a per-message TTL, optionally
 * guarded by the key's last revision (0: the key has no live record), reads by direct get, and a mirror that
 * keeps every record under a prefix in memory. A guarded write that lost a race throws ConcurrencyError.
 */
export class FleetStore {
  constructor(
    private readonly js: JetStreamClient,
    readonly kv: KV,
  ) {}

  async write(key: string, value: unknown, options: { ttlMs: number; expect?: number }): Promise<number> {
    try {
      const ack = await this.js.publish(`$KV.${FLEET_BUCKET}.${key}`, JSON.stringify(value), {
        ttl: ttlOf(options.ttlMs),
        ...(options.expect === undefined ? {} : { expect: { lastSubjectSequence: options.expect } }),
      });
      return ack.seq;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) throw new ConcurrencyError(`${key} changed under us`);
      throw error;
    }
  }

  /** The key's live record; revision 0 when it has none (never written, deleted, or aged out). */
  async read(key: string): Promise<Versioned> {
    const entry = await this.kv.get(key);
    return entryOf(entry) ?? { revision: 0, value: undefined };
  }

  /** Hands every record under `key` (a wildcard) to `apply` as it changes (undefined: deleted). */
  mirror(key: string, apply: (name: string, record: Versioned | undefined) => void, log: Logger): KvMirror<Versioned> {
    return new KvMirror(this.kv, {
      name: `fleet ${key}`,
      key,
      decode: (entry) => entryOf(entry) ?? { revision: entry.revision, value: undefined },
      onPut: (name, record) => apply(name, record),
      onDelete: (name) => apply(name, undefined),
      log,
    });
  }
}

function entryOf(entry: KvEntry | null): Versioned | undefined {
  if (!entry || entry.operation !== "PUT") return undefined;
  return { revision: entry.revision, value: entry.json() };
}
