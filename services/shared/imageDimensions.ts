import { imageSize } from "image-size";

/**
 * Largest width or height of a reference image, in pixels. Bytes are capped elsewhere, but a few hundred
 * KB of PNG can declare 12000×12000, which ffmpeg decodes to 576 MB of pixels (its render peaked at 631 MiB).
 * With 4096 the render's peak stays where a render without any reference is (about 220 MB here), and every
 * vendor's own limit for a reference is at or below a side of 6000 anyway.
 */
export const MAX_IMAGE_SIDE = 4096;
/** The same bound for ffmpeg's decoder (`-max_pixels`), should a header and its data ever disagree. */
export const MAX_IMAGE_PIXELS = MAX_IMAGE_SIDE * MAX_IMAGE_SIDE;

/**
 * What is wrong with an image's size, read from its header (PNG IHDR, JPEG SOF, GIF, WebP) before anything
 * decodes it: a phrase for the customer ("12000×12000 pixels; the limit is …") when it is larger than
 * MAX_IMAGE_SIDE. A header too broken to read is left to the decoder, which says it cannot decode it (and
 * `-max_pixels` still bounds what it would allocate).
 */
export function imageSizeProblem(bytes: Uint8Array): string | undefined {
  let width: number | undefined;
  let height: number | undefined;
  try {
    ({ width, height } = imageSize(bytes));
  } catch {
    return undefined;
  }
  if (width === undefined || height === undefined || (width <= MAX_IMAGE_SIDE && height <= MAX_IMAGE_SIDE)) return undefined;
  return `${width}×${height} pixels; the limit is ${MAX_IMAGE_SIDE}×${MAX_IMAGE_SIDE}`;
}
