import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { fetchReference } from "../services/runner/providers/local/referenceFetch.ts";
import { renderVideo, type RenderRequest } from "../services/runner/providers/local/render.ts";
import { RenderFailure } from "../services/runner/providers/local/renderFailure.ts";

const FFMPEG = "/usr/bin/ffmpeg";
const FFPROBE = "/usr/bin/ffprobe";
const run = promisify(execFile);

const Probe = z.object({
  streams: z.array(
    z.object({
      codec_type: z.string(),
      codec_name: z.string(),
      width: z.number().optional(),
      height: z.number().optional(),
      pix_fmt: z.string().optional(),
      r_frame_rate: z.string(),
      nb_frames: z.string().optional(),
      duration: z.string().optional(),
    }),
  ),
  format: z.object({ duration: z.string() }),
});

async function probe(file: string): Promise<z.infer<typeof Probe>> {
  const { stdout } = await run(FFPROBE, ["-v", "error", "-show_streams", "-show_format", "-of", "json", file]);
  return Probe.parse(JSON.parse(stdout));
}

interface Frame {
  width: number;
  rgb: Buffer;
}

async function frame(file: string, index: number, width: number, height: number): Promise<Frame> {
  const { stdout } = await run(
    FFMPEG,
    ["-v", "error", "-i", file, "-vf", `select=eq(n\\,${index})`, "-fps_mode", "passthrough", "-frames:v", "1"]
      .concat(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"]),
    { encoding: "buffer", maxBuffer: 64 * 1024 * 1024 },
  );
  expect(stdout.length).toBe(width * height * 3);
  return { width, rgb: stdout };
}

function pixel(f: Frame, x: number, y: number): [number, number, number] {
  const i = (y * f.width + x) * 3;
  return [f.rgb[i] ?? -1, f.rgb[i + 1] ?? -1, f.rgb[i + 2] ?? -1];
}

/** Mean absolute per-channel difference over the rectangle [x0,x1) x [y0,y1). */
function regionDiff(a: Frame, b: Frame, x0: number, y0: number, x1: number, y1: number): number {
  let sum = 0;
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const p = pixel(a, x, y);
      const q = pixel(b, x, y);
      sum += Math.abs(p[0] - q[0]) + Math.abs(p[1] - q[1]) + Math.abs(p[2] - q[2]);
    }
  }
  return sum / ((x1 - x0) * (y1 - y0) * 3);
}

const isRed = ([r, g, b]: [number, number, number]): boolean => r > 200 && g < 60 && b < 60;

let dir = "";
let scratch = "";
let savedTmpdir: string | undefined;
let seq = 0;
const out = (): string => join(dir, `out-${++seq}.mp4`);

function req(overrides: Partial<RenderRequest>): RenderRequest {
  return {
    ffmpegPath: FFMPEG,
    outputPath: out(),
    width: 1280,
    height: 720,
    durationSeconds: 1,
    prompt: "a lighthouse at dusk, waves crashing",
    generateAudio: false,
    watermark: false,
    // Half veryfast's CPU (the shipped default); the preset's own test below renders with both.
    preset: "ultrafast",
    ...overrides,
  };
}

/** renderVideo's temp dirs; TMPDIR points at `scratch` for this file so only ours are counted. */
const leftovers = async (): Promise<string[]> => readdir(scratch);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "reelay-localrender-test-"));
  scratch = join(dir, "scratch");
  await mkdir(scratch);
  savedTmpdir = process.env.TMPDIR;
  process.env.TMPDIR = scratch;
});

afterAll(async () => {
  if (savedTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmpdir;
  await rm(dir, { recursive: true, force: true });
});

describe("renderVideo", () => {
  it("renders a 16:9 H.264 MP4 at 24 fps with an AAC track of the requested length, moov first", async () => {
    const file = out();
    await renderVideo(req({ outputPath: file, durationSeconds: 5, generateAudio: true, watermark: true }));

    const info = await probe(file);
    const video = info.streams.find((s) => s.codec_type === "video");
    const audio = info.streams.find((s) => s.codec_type === "audio");
    expect(video).toMatchObject({ codec_name: "h264", width: 1280, height: 720, pix_fmt: "yuv420p", r_frame_rate: "24/1" });
    expect(video?.nb_frames).toBe("120");
    expect(audio?.codec_name).toBe("aac");
    expect(Math.abs(Number(info.format.duration) - 5)).toBeLessThan(0.1);
    expect(Math.abs(Number(audio?.duration) - 5)).toBeLessThan(0.1);

    const bytes = await readFile(file);
    expect(bytes.indexOf("moov")).toBeGreaterThan(0);
    expect(bytes.indexOf("moov")).toBeLessThan(bytes.indexOf("mdat"));
    expect(await leftovers()).toEqual([]);
  }, 30_000);

  it.each([
    [720, 1280, "9:16"],
    [1470, 630, "21:9"],
    [960, 960, "1:1"],
    [834, 1112, "3:4"],
  ])("renders %ix%i (%s) with no audio stream when generateAudio is false", async (width, height) => {
    const file = out();
    await renderVideo(req({ outputPath: file, width, height, durationSeconds: 2 }));

    const info = await probe(file);
    expect(info.streams.map((s) => s.codec_type)).toEqual(["video"]);
    expect(info.streams[0]).toMatchObject({ codec_name: "h264", width, height });
    expect(Math.abs(Number(info.format.duration) - 2)).toBeLessThan(0.1);
  }, 20_000);

  it("encodes with the preset it is given (x264 writes its settings into the stream)", async () => {
    const quick = out();
    const shipped = out();
    await renderVideo(req({ outputPath: quick, preset: "ultrafast" }));
    await renderVideo(req({ outputPath: shipped, preset: "veryfast" }));

    const x264Settings = async (path: string): Promise<string> => /subme=\d+/.exec(await readFile(path, "latin1"))?.[0] ?? "none";
    expect(await x264Settings(quick)).toBe("subme=0");
    expect(await x264Settings(shipped)).toBe("subme=2");
  }, 20_000);

  it("draws a watermark in the bottom-right corner only when asked", async () => {
    const plain = out();
    const marked = out();
    await renderVideo(req({ outputPath: plain }));
    await renderVideo(req({ outputPath: marked, watermark: true }));

    const a = await frame(plain, 0, 1280, 720);
    const b = await frame(marked, 0, 1280, 720);
    expect(regionDiff(a, b, 1088, 634, 1280, 720)).toBeGreaterThan(15);
    expect(regionDiff(a, b, 0, 0, 256, 108)).toBeLessThan(2);
  }, 20_000);

  it("shows the reference image, scaled and letterboxed, as the first frame and animates after it", async () => {
    const red = join(dir, "red.png");
    await run(FFMPEG, ["-v", "error", "-f", "lavfi", "-i", "color=red:s=320x240", "-frames:v", "1", "-update", "1", red]);
    const file = out();
    await renderVideo(req({ outputPath: file, width: 960, height: 960, imagePath: red, watermark: true }));

    const info = await probe(file);
    expect(info.streams[0]?.nb_frames).toBe("24");
    expect(Math.abs(Number(info.format.duration) - 1)).toBeLessThan(0.1);

    const first = await frame(file, 0, 960, 960);
    expect(isRed(pixel(first, 480, 480))).toBe(true);
    // 4:3 into 1:1 keeps the aspect ratio: black bands above and below.
    expect(Math.max(...pixel(first, 480, 40))).toBeLessThan(30);
    // The watermark is on every frame, the reference frame included (white text on the black band).
    let brightest = 0;
    for (let y = 860; y < 960; y++) for (let x = 780; x < 960; x++) brightest = Math.max(brightest, ...pixel(first, x, y));
    expect(brightest).toBeGreaterThan(150);

    const second = await frame(file, 1, 960, 960);
    expect(regionDiff(first, second, 0, 0, 960, 960)).toBeGreaterThan(30);
  }, 20_000);

  it("draws any prompt literally: quotes, colons, backslashes, percent, newlines, unicode, 4000 chars", async () => {
    const nasty =
      `It's "quoted" \u2014 key: value; 100% done {x} %{pts} %{eif:1:d} \\n \\\\ C:\\temp\\ 'a:b' [in] [out], x;y=1\n` +
      "next line\r\nCRLF\ttab \u0000\u0007 bell \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud83c\udfac\ud83d\udc09 \u0645\u0631\u062d\u0628\u0627 " +
      "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac e\u0301 \ud800 lone surrogate " +
      "x".repeat(300) +
      " ";
    const prompt = nasty.repeat(20).slice(0, 4000);
    const blank = out();
    const file = out();
    await renderVideo(req({ outputPath: blank, prompt: "" }));
    await renderVideo(req({ outputPath: file, prompt }));

    const info = await probe(file);
    expect(info.streams[0]).toMatchObject({ codec_name: "h264", width: 1280, height: 720 });
    const withText = await frame(file, 0, 1280, 720);
    const without = await frame(blank, 0, 1280, 720);
    expect(regionDiff(withText, without, 320, 180, 960, 540)).toBeGreaterThan(15);
  }, 20_000);

  it("refuses a reference that is not an image before ffmpeg sees it, leaving no output or temp files", async () => {
    const notImage = join(dir, "not-an-image.png");
    await writeFile(notImage, "#EXTM3U\n#EXTINF:1,\n/etc/hostname\n");
    const file = out();

    const err = await renderVideo(req({ outputPath: file, imagePath: notImage })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RenderFailure);
    expect(err).toMatchObject({ reason: "image_url is not a PNG, JPEG, GIF or WebP image" });
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);
    expect(await leftovers()).toEqual([]);
  }, 20_000);

  it("says the reference image could not be decoded, keeping ffmpeg's own text for operators only", async () => {
    const broken = join(dir, "broken.png");
    // A PNG signature followed by garbage: it passes the sniff, and ffmpeg cannot decode it.
    await writeFile(broken, Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.from("not really a png at all")]));
    const file = out();

    const err = await renderVideo(req({ outputPath: file, imagePath: broken })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RenderFailure);
    expect(err).toMatchObject({ reason: "the reference image could not be decoded", detail: expect.stringMatching(/^ffmpeg failed \(exit code \d+\): .*\S/s) });
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);
    expect(await leftovers()).toEqual([]);
  }, 20_000);

  it("names the caller's path when the reference image is missing", async () => {
    const missing = join(dir, "missing.png");
    await expect(renderVideo(req({ imagePath: missing }))).rejects.toThrow(missing);
  });

  it("reports a missing ffmpeg binary clearly", async () => {
    await expect(renderVideo(req({ ffmpegPath: join(dir, "no-such-ffmpeg") }))).rejects.toThrow(/ffmpeg could not start/);
  });

  it("kills ffmpeg on abort and removes the partial output", async () => {
    const file = out();
    const controller = new AbortController();
    const started = Date.now();
    const rendering = renderVideo(req({ outputPath: file, durationSeconds: 15, generateAudio: true, signal: controller.signal }));
    let during: string[] = [];
    setTimeout(async () => {
      during = await leftovers();
      controller.abort();
    }, 200);

    await expect(rendering).rejects.toMatchObject({ name: "AbortError" });
    expect(during).toEqual([expect.stringMatching(/^reelay-render-/)]);
    expect(Date.now() - started).toBeLessThan(2_000);
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);
    expect(await leftovers()).toEqual([]);
  }, 20_000);

  it("rejects sizes libx264 cannot encode and durations out of range before starting ffmpeg", async () => {
    await expect(renderVideo(req({ width: 1279 }))).rejects.toThrow(/even positive integers/);
    await expect(renderVideo(req({ durationSeconds: 16 }))).rejects.toThrow(/1\.\.15/);
  });
});

describe("fetchReference", () => {
  const png = Buffer.from(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC",
    "base64",
  );
  let server: Server;
  let base = "";

  beforeAll(async () => {
    server = createServer((request, response) => {
      if (request.url === "/red.png") {
        response.writeHead(200, { "content-type": "image/png" }).end(png);
      } else if (request.url === "/big") {
        response.writeHead(200, { "content-length": "2000" }).end(Buffer.alloc(2000));
      } else if (request.url === "/big-chunked") {
        // No content-length: the limit must be enforced while reading.
        response.writeHead(200);
        response.write(Buffer.alloc(800));
        response.end(Buffer.alloc(800));
      } else {
        response.writeHead(404).end("not found");
      }
    });
    await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((closed) => server.close(closed));
  });

  const refDir = (): string => join(dir, "refs");

  it("decodes a base64 data: URL into a file named by its content", async () => {
    const path = await fetchReference(`data:image/png;base64,${png.toString("base64")}`, refDir(), 1000);
    expect(path.startsWith(refDir())).toBe(true);
    expect(path.endsWith(".png")).toBe(true);
    expect(await readFile(path)).toEqual(png);
  });

  it("decodes a percent-encoded data: URL byte for byte", async () => {
    const encoded = [...png].map((byte) => `%${byte.toString(16).padStart(2, "0")}`).join("");
    const path = await fetchReference(`data:image/png,${encoded}`, refDir(), 1000);
    expect(await readFile(path)).toEqual(png);
  });

  it("refuses playlists and anything else that is not an image, whatever the declared type", async () => {
    const playlist = Buffer.from("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n");
    for (const type of ["application/vnd.apple.mpegurl", "image/png"]) {
      await expect(fetchReference(`data:${type};base64,${playlist.toString("base64")}`, refDir(), 10_000)).rejects.toMatchObject({
        reason: "image_url is not a PNG, JPEG, GIF or WebP image",
      });
    }
    const dash = Buffer.from('<?xml version="1.0"?><MPD><Period><AdaptationSet><Representation><BaseURL>file:///etc/passwd</BaseURL>');
    await expect(fetchReference(`data:application/dash+xml;base64,${dash.toString("base64")}`, refDir(), 10_000)).rejects.toBeInstanceOf(RenderFailure);
    await expect(fetchReference("data:text/plain,ffconcat%20version%201.0%0Afile%20%2Fetc%2Fpasswd", refDir(), 10_000)).rejects.toBeInstanceOf(RenderFailure);
  });

  it("downloads an http URL", async () => {
    const path = await fetchReference(`${base}/red.png`, refDir(), 1000);
    expect(await readFile(path)).toEqual(png);
  });

  it("refuses bodies over maxBytes, announced or streamed, and data: URLs over maxBytes", async () => {
    await expect(fetchReference(`${base}/big`, refDir(), 1000)).rejects.toThrow(/exceeds 1000 bytes/);
    await expect(fetchReference(`${base}/big-chunked`, refDir(), 1000)).rejects.toThrow(/exceeds 1000 bytes/);
    const big = `data:image/png;base64,${Buffer.alloc(1001).toString("base64")}`;
    await expect(fetchReference(big, refDir(), 1000)).rejects.toThrow(/exceeds 1000 bytes/);
  });

  it("refuses non-2xx statuses", async () => {
    await expect(fetchReference(`${base}/missing.png`, refDir(), 1000)).rejects.toThrow(/HTTP 404/);
  });

  it("refuses other schemes and malformed URLs", async () => {
    await expect(fetchReference("file:///etc/passwd", refDir(), 1000)).rejects.toThrow(/unsupported URL scheme "file:"/);
    await expect(fetchReference("ftp://example.com/a.png", refDir(), 1000)).rejects.toThrow(/unsupported URL scheme/);
    await expect(fetchReference("not a url", refDir(), 1000)).rejects.toThrow(/not a valid URL/);
  });
});
