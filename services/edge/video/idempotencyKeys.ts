import { createHash } from "node:crypto";
import { ValidationError } from "../../shared/errors.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";

export function validateIdempotencyKey(header: string): string {
  if (header.length > 255) throw new ValidationError("Idempotency-Key must be at most 255 characters");
  return header;
}

/** A key as it is stored (the opening, the index, the msgID): its SHA-256, so a key's text is never kept. */
export const keyHashOf = (key: string): string => createHash("sha256").update(key).digest("hex");

/** The msgID of a keyed create's opening: a retry within the stream's duplicate window is found by it. */
export const keyedOpeningMsgId = (account: string, keyHash: string): string => `key-${account}-${keyHash}`;

/** The request as normalized (defaults applied), minus what config decides (price, provider): one hash. */
export function requestFingerprint(request: NormalizedVideoRequest): string {
  const { job, ignoredFields, callbackUrl } = request;
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
    callbackUrl ?? null,
    job.remixOf ?? null,
  ];
  return createHash("sha256").update(JSON.stringify(canonical)).digest("hex");
}
