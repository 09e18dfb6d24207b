import { createHash } from "node:crypto";
import { JetStreamApiError, type JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { z } from "zod";
import { BUCKETS } from "../../../infra/jetstreamLayout.ts";
import { ValidationError } from "../../shared/errors.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";

/**
 * A claim on an Idempotency-Key, per account (bucket `idempotency`):
 * - `claimed`: a create owns the key and is between taking a task id and queueing its job;
 * - `queued`: the task's job is on the queue — the task exists, retries answer with it;
 * - `refused`: the create was refused before queueing (403, 503…): requests that raced it answer the same
 *   refusal; a later retry runs the create again (e.g. after a top-up).
 * `fingerprint` is the hash of the normalized request, so a key reused for another request is a conflict.
 */
export const Claim = z.object({
  taskId: z.number().int().positive(),
  fingerprint: z.string(),
  state: z.enum(["claimed", "queued", "refused"]),
  at: z.string(),
  refusal: z.object({ status: z.number().int(), message: z.string() }).optional(),
});
export type Claim = z.infer<typeof Claim>;

export interface ClaimEntry {
  claim: Claim;
  /** The entry's stream sequence: the fence for the next write. */
  revision: number;
  /** When the server stored it (the server's clock, shared by every edge). */
  storedAt: number;
}

/** How long a key returns the same task (as Stripe's do): a per-message TTL, renewed by nothing. */
export const KEY_LIFETIME = "24h";
/** A refusal only has to outlive the requests that raced the refused create. */
export const REFUSAL_LIFETIME = "10m";

/** "Wrong last sequence", and its variant for a sequence the stream never had. */
const LOST_RACE = new Set([10071, 10164]);

/** The request as normalized (defaults applied), minus what config decides (price, provider): one hash. */
export function requestFingerprint(request: NormalizedVideoRequest): string {
  const { job, ignoredFields } = request;
  const { image_url, video_url, audio_url } = job.references;
  const canonical = [
    job.model,
    job.prompt,
    job.durationSeconds,
    job.ratio,
    job.generateAudio,
    job.watermark,
    image_url ?? null,
    video_url ?? null,
    audio_url ?? null,
    [...ignoredFields].sort(),
  ];
  return createHash("sha256").update(JSON.stringify(canonical)).digest("hex");
}

/**
 * Reads and writes claims. Every write is fenced on the entry's last revision (0 = no entry), so of two
 * writers only one wins, and carries its own TTL (nats-server ≥ 2.11 per-message TTL; the bucket's stream
 * allows it), so keys expire without a sweep.
 */
export class IdempotencyKeys {
  constructor(private readonly js: JetStreamClient, private readonly bucket: KV) {}

  static validate(header: string): string {
    if (header.length > 255) throw new ValidationError("Idempotency-Key must be at most 255 characters");
    return header;
  }

  async read(account: string, key: string): Promise<ClaimEntry | undefined> {
    const entry = await this.bucket.get(this.name(account, key));
    if (!entry || entry.operation !== "PUT" || entry.length === 0) return undefined;
    return { claim: Claim.parse(entry.json()), revision: entry.revision, storedAt: entry.created.getTime() };
  }

  /** Writes `claim` if the entry is still at `revision`; resolves to the new revision, or undefined if another writer got there first. */
  async write(account: string, key: string, claim: Claim, revision: number, ttl: string): Promise<number | undefined> {
    const subject = `$KV.${BUCKETS.idempotency}.${this.name(account, key)}`;
    try {
      const ack = await this.js.publish(subject, JSON.stringify(claim), { expect: { lastSubjectSequence: revision }, ttl });
      return ack.seq;
    } catch (error) {
      if (error instanceof JetStreamApiError && LOST_RACE.has(error.code)) return undefined;
      throw error;
    }
  }

  private name(account: string, key: string): string {
    return `${account}.${createHash("sha256").update(key).digest("hex")}`;
  }
}
