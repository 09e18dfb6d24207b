import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";

const run = promisify(execFile);
const FFMPEG = "/usr/bin/ffmpeg";

/** A PNG of one colour, made by ffmpeg. */
async function solidPng(dir: string, name: string, colour: string): Promise<Buffer> {
  const path = join(dir, name);
  await run(FFMPEG, ["-v", "error", "-f", "lavfi", "-i", `color=${colour}:s=64x48`, "-frames:v", "1", "-update", "1", path]);
  return readFile(path);
}

/** RGB of the centre pixel of a video's first frame. */
async function firstFrameCentre(url: string, dir: string): Promise<number[]> {
  const video = join(dir, "video.mp4");
  await run("curl", ["-sf", "-o", video, url]);
  const { stdout } = await run(FFMPEG, ["-v", "error", "-i", video, "-frames:v", "1", "-vf", "crop=2:2:iw/2:ih/2", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], {
    encoding: "buffer",
  });
  return [...stdout.subarray(0, 3)];
}

describe("reference inputs: only images we decode ourselves, and failures that leak nothing", () => {
  let app: TestApp;
  let dir: string;
  let client: VideoClient;
  let key: string;
  const mini = { model: "VideoModel-2.0", prompt: "with a reference", duration: 4 };
  const dataUrl = (type: string, bytes: Buffer) => `data:${type};base64,${bytes.toString("base64")}`;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "reelay-ref-safety-"));
    app = await startTestApp();
    key = await app.keyFor("referrer");
    client = new VideoClient(app.baseUrl, key);
  });
  afterAll(async () => {
    await app?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const finalOf = async (body: unknown) => {
    const created = await client.create(body);
    expect(created.status).toBe(200);
    const taskId = created.body.data?.task_id as number;
    return { taskId, final: await client.waitForFinal(taskId) };
  };

  it("never renders a local file named by an HLS playlist inside a data: image_url", async () => {
    // A media file on the server that a playlist names (ffmpeg's HLS reader allows .mp4 segments):
    // before the fix it became the customer's first frame.
    const secret = join(dir, "secret.mp4");
    await run(FFMPEG, ["-v", "error", "-f", "lavfi", "-i", "color=lime:s=64x48:d=1", "-c:v", "libx264", "-pix_fmt", "yuv420p", secret]);
    const playlist = Buffer.from(`#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nfile://${secret}\n#EXTINF:1,\n${secret}\n#EXT-X-ENDLIST\n`);
    for (const type of ["application/vnd.apple.mpegurl", "image/png"]) {
      const { final } = await finalOf({ ...mini, image_url: dataUrl(type, playlist) });
      expect(final).toEqual({ status: 500, body: { code: 500, msg: "image_url is not a PNG, JPEG, GIF or WebP image" } });
    }
  });

  it("refuses a file: URL at once", async () => {
    const refused = await client.create({ ...mini, image_url: "file:///etc/passwd" });
    expect(refused).toEqual({ status: 400, body: { code: 400, msg: "image_url must be an http(s) or data: URL (at most 2048 characters, 1048576 for a data: URL)" } });
  });

  it("refuses an address longer than 2,048 characters, and a data: URL longer than 1 MiB, before anything is stored (a 3 MB host name made a 6 MB failure event, and a ledger group of them stalled every account's reactors)", async () => {
    const longHost = await client.create({ ...mini, image_url: `http://${"a".repeat(2100)}.com/x.png` });
    expect(longHost).toEqual({ status: 400, body: { code: 400, msg: expect.stringMatching(/^image_url must be an http\(s\) or data: URL \(at most 2048 characters/) } });
    // OpenAI's JSON create takes bodies as large as an upload (10 MB), so its inline image meets the limit itself.
    const bigData = await fetch(`${app.baseUrl}/v1/videos`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "VideoModel-2.0", prompt: "big inline image", input_reference: { image_url: `data:image/png;base64,${"A".repeat(2 * 1024 * 1024)}` } }),
    });
    expect([bigData.status, JSON.stringify(await bigData.json())]).toEqual([400, expect.stringMatching(/1048576 for a data: URL/)]);
  });

  it("still uses a real PNG data: URL as the first frame", async () => {
    const red = await solidPng(dir, "red.png", "red");
    const { final } = await finalOf({ ...mini, image_url: dataUrl("image/png", red) });
    expect(final.body.data?.status).toBe("success");
    const [r = 0, g = 255, b = 255] = await firstFrameCentre(String(final.body.data?.video_url), dir);
    expect(r).toBeGreaterThan(200);
    expect(Math.max(g, b)).toBeLessThan(60);
  }, 30_000);

  it("tells the customer the reference could not be decoded, and keeps ffmpeg's output for operators in the failed event", async () => {
    // A 1×1 header (a header declaring more than 4096 pixels a side is refused before decoding: issue 32), then garbage.
    const broken = Buffer.concat([Buffer.from("89504e470d0a1a0a", "hex"), Buffer.from("0000000d494844520000000100000001", "hex"), Buffer.alloc(64, 7)]);
    const { taskId, final } = await finalOf({ ...mini, image_url: dataUrl("image/png", broken) });
    expect(final).toEqual({ status: 500, body: { code: 500, msg: "the reference image could not be decoded" } });

    const { events } = await readTask(app.nats, taskId);
    const failed = events.find((event) => event.type === "GenerationFailed");
    expect(failed?.data).toMatchObject({ reason: "the reference image could not be decoded", detail: expect.stringContaining("ffmpeg failed") });
  });
});
