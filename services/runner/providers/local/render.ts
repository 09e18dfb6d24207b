import { spawn } from "node:child_process";
import { access, copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { imageSizeProblem, MAX_IMAGE_PIXELS } from "../../../shared/imageDimensions.ts";
import { IMAGE_FORMATS_TEXT, sniffImage, type ImageKind } from "../../../shared/imageKind.ts";
import type { X264Preset } from "../../../../contracts/config.ts";
import { RenderFailure } from "./renderFailure.ts";
import { shortOfResources } from "./shortOfResources.ts";

export interface RenderRequest {
  ffmpegPath: string;
  outputPath: string;
  width: number;
  height: number;
  durationSeconds: number;
  prompt: string;
  generateAudio: boolean;
  watermark: boolean;
  /** x264's speed preset (the provider's `encoderPreset`). */
  preset: X264Preset;
  imagePath?: string;
  signal?: AbortSignal;
}

const FPS = 24;
const DEJAVU_SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
// Enough text to recognise the prompt on screen; the full prompt lives in the task record.
const MAX_PROMPT_GRAPHEMES = 1000;
const STDERR_TAIL_BYTES = 4096;

export async function renderVideo(req: RenderRequest): Promise<void> {
  const { width, height, durationSeconds } = req;
  if (!isEvenPositive(width) || !isEvenPositive(height)) {
    throw new Error(`render: width and height must be even positive integers, got ${width}x${height}`);
  }
  if (!Number.isInteger(durationSeconds) || durationSeconds < 1 || durationSeconds > 15) {
    throw new Error(`render: durationSeconds must be an integer 1..15, got ${durationSeconds}`);
  }
  req.signal?.throwIfAborted();

  const image = req.imagePath === undefined ? undefined : await imageKind(req.imagePath);
  const outputPath = resolve(req.outputPath);
  const work = await mkdtemp(join(tmpdir(), "reelay-render-"));
  try {
    // ffmpeg runs inside `work` and reads its inputs under fixed names, so neither prompt text nor a
    // caller's path passes through filtergraph escaping or image2's `%d` pattern parsing.
    const text = textLayout(width, height);
    await writeFile(join(work, "prompt.txt"), wrapPrompt(req.prompt, text.columns, text.rows));
    if (req.imagePath !== undefined) await copyFile(req.imagePath, join(work, "reference-image"));
    const font = await fontOption();
    await runFfmpeg(req.ffmpegPath, ffmpegArgs(req, outputPath, font, text, image), work, req.signal).catch(async (error: unknown) => {
      // Say which input was at fault: a reference that does not decode is the customer's to fix.
      // (Not when ffmpeg could not even start for want of files or memory: the image is not at fault then.)
      if (error instanceof RenderFailure && image && !shortOfResources(error) && !(await decodes(req.ffmpegPath, image, work))) {
        throw new RenderFailure("the reference image could not be decoded", error.detail);
      }
      throw error;
    });
  } catch (err) {
    await rm(outputPath, { force: true });
    throw err;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const isEvenPositive = (n: number): boolean => Number.isInteger(n) && n > 0 && n % 2 === 0;

/**
 * The reference image's format from its first bytes, and its size from its header; anything else, or a
 * picture larger than MAX_IMAGE_SIDE, is refused before ffmpeg sees it. (The file is a fetched reference,
 * already capped in bytes.)
 */
async function imageKind(path: string): Promise<ImageKind> {
  const bytes = await readFile(path);
  const kind = sniffImage(bytes.subarray(0, 16));
  if (!kind) throw new RenderFailure(`image_url is not a ${IMAGE_FORMATS_TEXT} image`);
  const sizeProblem = imageSizeProblem(bytes);
  if (sizeProblem) throw new RenderFailure(`image_url is ${sizeProblem}`);
  return kind;
}

/**
 * Reads a reference only as its sniffed format, from our own temp file: no protocol but `file` (so
 * nothing in it can make ffmpeg open a URL) and an explicit demuxer (so it cannot be taken for a playlist
 * or a concat list that names other files).
 */
const referenceInput = (image: ImageKind): string[] => ["-protocol_whitelist", "file", "-max_pixels", String(MAX_IMAGE_PIXELS), "-f", image.demuxer, "-i", "reference-image"];

async function decodes(ffmpegPath: string, image: ImageKind, work: string): Promise<boolean> {
  const args = ["-hide_banner", "-nostdin", "-loglevel", "error", ...referenceInput(image), "-frames:v", "1", "-f", "null", "-"];
  return runFfmpeg(ffmpegPath, args, work).then(
    () => true,
    () => false,
  );
}

type TextLayout = ReturnType<typeof textLayout>;
function textLayout(width: number, height: number) {
  const fontSize = Math.max(12, Math.round(Math.min(width, height) / 20));
  // DejaVu Sans averages ~0.55 em per Latin glyph; 0.6 leaves slack for wide letters.
  const columns = Math.max(8, Math.floor((width * 0.86) / (fontSize * 0.6)));
  const rows = Math.max(1, Math.floor((height * 0.7) / (fontSize * 1.3)));
  return { fontSize, columns, rows };
}

// East Asian wide characters and emoji take about two Latin columns.
const WIDE = /[\u1100-\u115F\u2E80-\uA4CF\uAC00-\uD7A3\uF900-\uFAFF\uFE30-\uFE4F\uFF00-\uFF60\uFFE0-\uFFE6\u{1F300}-\u{1FAFF}\u{20000}-\u{3FFFD}]/u;
const cellWidth = (g: string): number => (WIDE.test(g) ? 2 : 1);
const widthOf = (gs: string[]): number => gs.reduce((sum, g) => sum + cellWidth(g), 0);
// Graphemes, so a hard break never splits an accent from its letter or an emoji sequence.
const graphemes = (s: string): string[] => Array.from(new Intl.Segmenter().segment(s), (g) => g.segment);

/** Greedy word wrap by display columns (drawtext has none); overlong words are hard-broken. */
function wrapPrompt(prompt: string, columns: number, rows: number): string {
  const normalised = prompt
    .replace(/\r\n?|[\u2028\u2029]/g, "\n")
    .replace(/\t/g, " ")
    .replace(/(?!\n)[\p{Cc}\p{Cs}]/gu, ""); // drawtext draws control characters as boxes
  const clean = graphemes(normalised).slice(0, MAX_PROMPT_GRAPHEMES).join("").trim();
  const lines: string[][] = [];
  for (const paragraph of clean.split("\n")) {
    let line: string[] = [];
    for (const word of paragraph.split(/ +/).filter((w) => w !== "")) {
      const gs = graphemes(word);
      if (line.length > 0 && widthOf(line) + 1 + widthOf(gs) <= columns) {
        line.push(" ", ...gs);
        continue;
      }
      if (line.length > 0) lines.push(line);
      line = [];
      for (const g of gs) {
        if (widthOf(line) + cellWidth(g) > columns) {
          lines.push(line);
          line = [];
        }
        line.push(g);
      }
    }
    lines.push(line);
  }
  if (lines.length > rows) {
    lines.length = rows;
    const last = lines[rows - 1] ?? [];
    while (last.length > 0 && widthOf(last) + 1 > columns) last.pop();
    last.push("…");
  }
  return lines.map((line) => line.join("")).join("\n");
}

async function fontOption(): Promise<string> {
  try {
    await access(DEJAVU_SANS);
    return `fontfile=${DEJAVU_SANS}`;
  } catch {
    return "font=Sans";
  }
}

function ffmpegArgs(req: RenderRequest, outputPath: string, font: string, text: TextLayout, image: ImageKind | undefined): string[] {
  const { width: w, height: h, durationSeconds: d } = req;
  const frames = d * FPS;
  const args = ["-hide_banner", "-nostdin", "-loglevel", "error", "-y"];
  args.push("-f", "lavfi", "-i", `testsrc2=size=${w}x${h}:rate=${FPS}:duration=${d}`);
  let nextInput = 1;
  const imageInput = image !== undefined ? nextInput++ : undefined;
  if (image !== undefined) args.push(...referenceInput(image));
  const audioInput = req.generateAudio ? nextInput++ : undefined;
  if (audioInput !== undefined) {
    args.push("-f", "lavfi", "-i", `sine=frequency=440:sample_rate=48000:duration=${d}`);
  }

  const pad = Math.round(text.fontSize / 2);
  const graph = [
    // expansion=none: a prompt containing `%{…}` must be drawn literally, not evaluated.
    `[0:v]drawtext=${font}:textfile=prompt.txt:expansion=none:fontsize=${text.fontSize}` +
      `:line_spacing=${Math.round(text.fontSize * 0.3)}:fontcolor=white:box=1:boxcolor=black@0.55` +
      `:boxborderw=${pad}:x=(w-tw)/2:y=(h-th)/2[bg]`,
  ];
  let video = "[bg]";
  if (imageInput !== undefined) {
    graph.push(
      `[${imageInput}:v]scale=${w}:${h}:force_original_aspect_ratio=decrease,` +
        `pad=${w}:${h}:(ow-iw)/2:(oh-ih)/2,setsar=1,trim=end_frame=1,setpts=PTS-STARTPTS[ref]`,
      "[ref][bg]concat=n=2:v=1:a=0[cat]",
    );
    video = "[cat]";
  }
  // trim rather than -frames:v: in ffmpeg 5.1 hitting -frames:v ends the whole output, cutting audio short.
  let tail = `trim=end_frame=${frames}`;
  if (req.watermark) {
    const size = Math.max(12, Math.round(Math.min(w, h) / 24));
    const margin = Math.round(size * 0.8);
    tail +=
      `,drawtext=${font}:text=reelay:fontsize=${size}:fontcolor=white@0.9:box=1:boxcolor=black@0.5` +
      `:boxborderw=${Math.round(size / 3)}:x=w-tw-${margin}:y=h-th-${margin}`;
  }
  graph.push(`${video}${tail},format=yuv420p[v]`);

  args.push("-filter_complex", graph.join(";"), "-map", "[v]");
  args.push("-c:v", "libx264", "-preset", req.preset, "-pix_fmt", "yuv420p", "-r", String(FPS));
  if (audioInput !== undefined) args.push("-map", `${audioInput}:a`, "-c:a", "aac", "-b:a", "128k");
  // file: keeps a path that looks like a protocol (e.g. "a:b.mp4") a plain file.
  args.push("-movflags", "+faststart", "-f", "mp4", `file:${outputPath}`);
  return args;
}

function runFfmpeg(ffmpegPath: string, args: string[], cwd: string, signal?: AbortSignal): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(ffmpegPath, args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = Buffer.alloc(0);
    child.stderr.on("data", (chunk: Buffer) => {
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > STDERR_TAIL_BYTES) stderr = stderr.subarray(stderr.length - STDERR_TAIL_BYTES);
    });
    // SIGKILL: on SIGTERM ffmpeg first finalises the file, which is wasted work on an abort.
    const onAbort = (): void => void child.kill("SIGKILL");
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) onAbort(); // aborted while the temp files were being written
    child.on("error", (err) => {
      signal?.removeEventListener("abort", onAbort);
      reject(new RenderFailure("rendering failed", `ffmpeg could not start (${ffmpegPath}): ${err.message}`, { cause: err }));
    });
    child.on("close", (code, killedBy) => {
      signal?.removeEventListener("abort", onAbort);
      if (signal?.aborted) return reject(signal.reason);
      if (code === 0) return resolvePromise();
      const lines = stderr.toString("utf8").trim().split("\n").slice(-10).join("\n");
      reject(new RenderFailure("rendering failed", `ffmpeg failed (${killedBy ?? `exit code ${code}`}): ${lines || "no error output"}`));
    });
  });
}
