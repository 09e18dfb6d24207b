import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";

function probe(file: string): { streams: Array<{ codec_type: string; codec_name: string; width?: number; height?: number }>; format: { duration: string } } {
  return JSON.parse(execFileSync("ffprobe", ["-v", "error", "-show_streams", "-show_format", "-of", "json", file], { encoding: "utf8" }));
}

describe("video tasks end to end", () => {
  let app: TestApp;
  let client: VideoClient;

  beforeAll(async () => {
    app = await startTestApp();
    client = new VideoClient(app.baseUrl, await app.keyFor("alice"));
  });
  afterAll(async () => app?.stop());

  it("creates a task that goes pending → running → success with a playable 720p MP4", async () => {
    const created = await client.create({ model: "VideoModel-2.0", prompt: "a red fox in snow", duration: 4, ratio: "9:16" });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ code: 200, msg: "success", data: { status: "pending" } });
    const taskId = created.body.data?.task_id as number;
    expect(Number.isInteger(taskId)).toBe(true);
    expect(created.body.data?.provider_task_id).toMatch(/^local-/);

    // Polled statuses only ever move forward. Which ones a poll happens to see is the machine's timing: a loaded
    // one saw running first (the create's answer above is the pending one).
    const seen: string[] = [];
    let final;
    for (;;) {
      final = await client.query(taskId);
      if (seen.at(-1) !== final.body.msg) seen.push(final.body.msg);
      if (final.body.data?.status === "success" || final.status !== 200) break;
      await new Promise((r) => setTimeout(r, 30));
    }
    // Seen in the lifecycle's order, and nothing else: the lifecycle's statuses that were seen, in its order.
    expect(seen).toEqual(["pending", "running", "success"].filter((status) => seen.includes(status)));
    expect(final.status).toBe(200);
    expect(final.body).toMatchObject({
      code: 200,
      msg: "success",
      data: { task_id: taskId, status: "success", duration: 4, resolution: "720*1280", total_tokens: Math.floor((720 * 1280 * 97) / 1024) },
    });

    const video = await fetch(String(final.body.data?.video_url));
    expect(video.status).toBe(200);
    expect(video.headers.get("content-type")).toBe("video/mp4");
    expect(video.headers.get("x-content-type-options")).toBe("nosniff");
    const bytes = Buffer.from(await video.arrayBuffer());
    expect(Number(video.headers.get("content-length"))).toBe(bytes.length);
    const file = join(mkdtempSync(join(tmpdir(), "reelay-e2e-")), "v.mp4");
    writeFileSync(file, bytes);
    const info = probe(file);
    const videoStream = info.streams.find((s) => s.codec_type === "video");
    expect(videoStream).toMatchObject({ codec_name: "h264", width: 720, height: 1280 });
    expect(info.streams.some((s) => s.codec_type === "audio")).toBe(true);
    expect(Number(info.format.duration)).toBeCloseTo(4, 0);

    const ranged = await fetch(String(final.body.data?.video_url), { headers: { range: "bytes=10-19" } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get("content-range")).toBe(`bytes 10-19/${bytes.length}`);
    expect(Buffer.from(await ranged.arrayBuffer())).toEqual(bytes.subarray(10, 20));

    const head = await fetch(String(final.body.data?.video_url), { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get("content-length"))).toBe(bytes.length);
  });

  it("hides a task from other accounts with the same 404 as a missing task", async () => {
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "mine", duration: 4 });
    const other = new VideoClient(app.baseUrl, await app.keyFor("mallory"));
    const stolen = await other.query(created.body.data?.task_id as number);
    const missing = await other.query(999_999);
    expect(stolen.status).toBe(404);
    expect(stolen.body).toEqual({ code: 404, msg: `task ${created.body.data?.task_id} does not exist` });
    expect(missing.status).toBe(404);
  });

  it("answers 401 for a missing or wrong key on both endpoints", async () => {
    const wrong = new VideoClient(app.baseUrl, "rly_not-a-key");
    expect((await wrong.create({ model: "VideoModel-2.0", prompt: "x" })).body.code).toBe(401);
    const noKey = await fetch(`${app.baseUrl}/api/compat/videosTask?id=1`);
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ code: 401 });
  });

  it("ignores references the model cannot use and records them on the created event", async () => {
    const created = await client.create({
      model: "VideoModel-2.0-mini",
      prompt: "text only model",
      duration: 4,
      image_url: "https://example.invalid/a.png",
      audio_url: "https://example.invalid/a.mp3",
    });
    expect(created.status).toBe(200);
    const taskId = created.body.data?.task_id as number;
    const { events } = await readTask(app.nats, taskId);
    expect(events[0]).toMatchObject({ type: "TaskSubmitted", data: { ignoredFields: ["image_url", "audio_url"], job: { references: {} } } });
    expect((await client.waitForFinal(taskId)).body.msg).toBe("success");
  });

  it("answers 403 for an unknown model", async () => {
    const answer = await client.create({ model: "VideoModel-9", prompt: "x" });
    expect(answer).toEqual({ status: 403, body: { code: 403, msg: "model not supported: VideoModel-9" } });
  });
});
