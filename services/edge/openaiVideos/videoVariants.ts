import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The stills OpenAI's `GET /videos/{id}/content` offers beside the video itself. */
export type StillVariant = "thumbnail" | "spritesheet";

/** Where a still made from a stored video is kept (next to it in the object store). */
export const stillObjectName = (variant: StillVariant, videoObject: string): string =>
  `${variant === "thumbnail" ? "thumb" : "sprite"}-${videoObject.replace(/\.mp4$/, "")}.${variant === "thumbnail" ? "webp" : "jpg"}`;

/** A still can take at most this long to make; a stored video is short, so this is generous. */
const FFMPEG_TIMEOUT_MS = 20_000;

/**
 * Makes a still from a stored MP4 with ffmpeg: the thumbnail is the first frame as WebP at the video's size
 * (OpenAI's is WebP too), the spritesheet one frame a second, 160 px wide, tiled 5 across on one JPEG.
 * The input is our own stored file, which `writeVideo` copies to the path it is given; ffmpeg reads it only as
 * MP4 (`-f mp4`, file protocol only).
 */
export async function makeStill(ffmpeg: string, variant: StillVariant, writeVideo: (path: string) => Promise<void>): Promise<Buffer> {
  const dir = await mkdtemp(join(tmpdir(), "reelay-still-"));
  try {
    const input = join(dir, "in.mp4");
    const output = join(dir, variant === "thumbnail" ? "out.webp" : "out.jpg");
    await writeVideo(input);
    const filters = variant === "thumbnail" ? ["-frames:v", "1", "-c:v", "libwebp", "-quality", "80"] : ["-vf", "fps=1,scale=160:-2,tile=5x4", "-frames:v", "1", "-q:v", "4"];
    await run(ffmpeg, ["-v", "error", "-protocol_whitelist", "file", "-f", "mp4", "-i", input, ...filters, "-y", output], { timeout: FFMPEG_TIMEOUT_MS });
    return await readFile(output);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
