/**
 * What a reference file is, from its first bytes — never from its name, URL or declared content type,
 * which the customer controls. Only formats we mean to decode pass: an HLS or DASH playlist, an ffconcat
 * list or any other text would make ffmpeg open further URLs or local files (issue 8: a playlist inside
 * a data: image_url put a server file into a customer's video).
 */
export interface ImageKind {
  /** ffmpeg demuxer that decodes exactly this format and opens nothing else. */
  demuxer: "png_pipe" | "jpeg_pipe" | "gif" | "webp_pipe";
  extension: ".png" | ".jpg" | ".gif" | ".webp";
}

const ascii = (bytes: Uint8Array, from: number, to: number): string => Buffer.from(bytes.subarray(from, to)).toString("latin1");
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export const IMAGE_FORMATS_TEXT = "PNG, JPEG, GIF or WebP";

/** The image format of a file starting with `head` (at least 12 bytes for WebP), or undefined. */
export function sniffImage(head: Uint8Array): ImageKind | undefined {
  if (Buffer.from(head.subarray(0, 8)).equals(PNG_SIGNATURE)) return { demuxer: "png_pipe", extension: ".png" };
  if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return { demuxer: "jpeg_pipe", extension: ".jpg" };
  if (ascii(head, 0, 6) === "GIF87a" || ascii(head, 0, 6) === "GIF89a") return { demuxer: "gif", extension: ".gif" };
  if (ascii(head, 0, 4) === "RIFF" && ascii(head, 8, 12) === "WEBP") return { demuxer: "webp_pipe", extension: ".webp" };
  return undefined;
}
