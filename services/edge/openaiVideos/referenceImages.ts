import { randomUUID } from "node:crypto";
import type { ObjectStore } from "@nats-io/obj";
import { ValidationError } from "../../shared/errors.ts";
import { imageSizeProblem } from "../../shared/imageDimensions.ts";
import { IMAGE_FORMATS_TEXT, sniffImage } from "../../shared/imageKind.ts";
import { withDetail } from "../chat/chatErrors.ts";

/**
 * Keeps an `input_reference` upload in the object store, where the runner and vendors fetch it from as the
 * task's `image_url` (`<public base>/references/<name>`). Only an image we recognise by its first bytes is
 * kept (whatever name or type the upload claims); the name is random, so the address is the capability.
 * Stored references age out with the videos (`videos.retentionDays`).
 */
export async function storeReferenceImage(videos: ObjectStore, bytes: Buffer): Promise<string> {
  const kind = sniffImage(bytes.subarray(0, 16));
  if (!kind || bytes.length === 0) {
    throw withDetail(new ValidationError(`input_reference must be a ${IMAGE_FORMATS_TEXT} image`), { param: "input_reference", code: "invalid_image_format" });
  }
  // Refused before anyone decodes it: a small file can declare a huge picture (issue 32).
  const sizeProblem = imageSizeProblem(bytes);
  if (sizeProblem) throw withDetail(new ValidationError(`input_reference is ${sizeProblem}`), { param: "input_reference", code: "image_too_large" });
  const name = `ref-${randomUUID()}${kind.extension}`;
  await videos.putBlob({ name, description: "input_reference" }, bytes);
  return name;
}
