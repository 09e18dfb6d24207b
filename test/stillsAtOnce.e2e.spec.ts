import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { arkSampleVideo } from "./fakes/arkUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/** An ffmpeg that notes when each run starts and ends, then runs the real one. */
function countedFfmpeg(dir: string, real: string): { path: string; mostAtOnce: () => number; runs: () => number } {
  const log = join(dir, "runs");
  const path = join(dir, "ffmpeg");
  writeFileSync(path, `#!/bin/sh\necho start >> "${log}"\n"${real}" "$@"\nstatus=$?\necho end >> "${log}"\nexit $status\n`);
  chmodSync(path, 0o755);
  const lines = () => readFileSync(log, "utf8").trim().split("\n");
  return {
    path,
    runs: () => lines().filter((line) => line === "start").length,
    mostAtOnce: () => {
      let running = 0;
      let most = 0;
      for (const line of lines()) most = Math.max(most, (running += line === "start" ? 1 : -1));
      return most;
    },
  };
}

describe("stills of many videos asked for at once", () => {
  let app: TestApp;
  let dir: string;
  let ffmpeg: ReturnType<typeof countedFfmpeg>;
  const realFfmpeg = process.env.FFMPEG_BIN;

  beforeAll(async () => {
    // Made with the real ffmpeg (once per process), so that only the stills are counted.
    const sample = arkSampleVideo();
    dir = mkdtempSync(join(tmpdir(), "reelay-stills-"));
    ffmpeg = countedFfmpeg(dir, realFfmpeg ?? "ffmpeg");
    // The edge finds ffmpeg at its first still; this file's app is the only one in its worker meanwhile.
    process.env.FFMPEG_BIN = ffmpeg.path;
    app = await startTestApp({ providers: () => new ScriptedVendor({}, sample) });
  });
  afterAll(async () => {
    if (realFfmpeg === undefined) delete process.env.FFMPEG_BIN;
    else process.env.FFMPEG_BIN = realFfmpeg;
    await app?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("are made two at a time on an edge (one tenant's burst started an ffmpeg for each of its videos at once)", async () => {
    const client = new OpenAI({ apiKey: await app.keyFor("stills", 100), baseURL: `${app.baseUrl}/v1`, maxRetries: 0 });
    const videos = await Promise.all(Array.from({ length: 6 }, () => client.videos.create({ model: "VideoModel-2.0-mini", prompt: "still", seconds: "4" })));
    for (const video of videos) await expect.poll(async () => (await client.videos.retrieve(video.id)).status, { timeout: 15_000 }).toBe("completed");
    const stills = await Promise.all(videos.map(async (video) => (await client.videos.downloadContent(video.id, { variant: "thumbnail" })).arrayBuffer()));
    expect(stills.map((still) => Buffer.from(still).subarray(8, 12).toString())).toEqual(Array(6).fill("WEBP"));
    expect(ffmpeg.runs()).toBe(6);
    expect(ffmpeg.mostAtOnce()).toBeLessThanOrEqual(2);
  });
});
