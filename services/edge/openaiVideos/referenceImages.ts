import { randomUUID } from "node:crypto";
import type { ObjectStore } from "@nats-io/obj";
import type { VideoJobSpec } from "../../../contracts/videoTask.ts";
import { InsufficientBalanceError } from "../../billing/account.ts";
import { costMicros, formatYuan } from "../../billing/pricing.ts";
import { ServiceUnavailableError, ValidationError } from "../../shared/errors.ts";
import { imageSizeProblem } from "../../shared/imageDimensions.ts";
import { isStoreFull } from "../../shared/infrastructureErrors.ts";
import { IMAGE_FORMATS_TEXT, sniffImage } from "../../shared/imageKind.ts";
import type { ReferenceUsage } from "../../shared/referenceUsage.ts";

/** An `input_reference` checked and named, not stored yet. */
export interface ReferenceUpload {
  /** `ref-<uuid>.<ext>`: random, so its address (`<public base>/references/<name>`) is the capability. */
  name: string;
  bytes: Buffer;
}

/**
 * Checks an `input_reference` without storing anything: only an image we recognise by its first bytes
 * (whatever name or type the upload claims), within the pixel limit.
 */
export function checkReferenceImage(bytes: Buffer): ReferenceUpload {
  const kind = sniffImage(bytes.subarray(0, 16));
  if (!kind || bytes.length === 0) {
    throw new ValidationError(`input_reference must be a ${IMAGE_FORMATS_TEXT} image`, { param: "input_reference", code: "invalid_image_format" });
  }
  // Refused before anyone decodes it: a small file can declare a huge picture (issue 32).
  const sizeProblem = imageSizeProblem(bytes);
  if (sizeProblem) throw new ValidationError(`input_reference is ${sizeProblem}`, { param: "input_reference", code: "image_too_large" });
  return { name: `ref-${randomUUID()}${kind.extension}`, bytes };
}

export interface ReferenceKeeping {
  /** The bucket `references`: its own max_bytes, objects age out past any task's deadline. */
  store: ObjectStore;
  usage: ReferenceUsage;
  /** Config `videos.referenceBytesPerAccount`. */
  quotaBytes: number;
  /** How long the store keeps an object (its max age): a reference is counted that long at most. */
  lifetimeMs: number;
  /** The account's available balance in micro-yuan, as the ledger has it now. */
  available(account: string): Promise<number>;
}

/**
 * Stores an upload for the task about to be created, once the balance covers the task and the account's
 * quota the upload: a request that will be refused stores nothing. The create's guarded write stays the
 * check that counts; this one only keeps refused requests out of the store.
 */
export async function keepReferenceImage(deps: ReferenceKeeping, account: string, upload: ReferenceUpload, job: VideoJobSpec): Promise<void> {
  const needed = costMicros([{ tokens: job.estimatedTokens, pricePerMillionTokens: job.pricePerMillionTokens }]);
  const available = await deps.available(account);
  if (available < needed) throw new InsufficientBalanceError(`insufficient balance: this task needs ${formatYuan(needed)} yuan, available ${formatYuan(Math.max(available, 0))}`);
  await deps.usage.reserve(account, upload.name, upload.bytes.length, deps.quotaBytes, Date.now() + deps.lifetimeMs);
  try {
    await deps.store.putBlob({ name: upload.name, description: "input_reference" }, upload.bytes);
  } catch (error) {
    await deps.usage.release(account, upload.name).catch(() => undefined);
    // The store is full (max_bytes, discard new): refused, and nothing else in JetStream is touched.
    if (isStoreFull(error)) throw new ServiceUnavailableError("reelay's store for uploaded references is full: try again later", 60, { cause: error });
    throw error;
  }
}

/** Removes an upload no task will use (its create was refused after it was stored). */
export async function dropReferenceImage(deps: ReferenceKeeping, account: string, name: string): Promise<void> {
  await deps.store.delete(name).catch(() => undefined);
  await deps.usage.release(account, name).catch(() => undefined);
}
