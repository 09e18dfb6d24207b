import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProviderSettings, type ReelayConfig, type VideoCapability } from "../contracts/config.ts";
import type { TaskEvent } from "../contracts/videoTask.ts";
import { ArkUpstream } from "./fakes/arkUpstream.ts";
import { DashScopeUpstream } from "./fakes/dashscopeUpstream.ts";
import { KlingUpstream } from "./fakes/klingUpstream.ts";
import { MiniMaxUpstream } from "./fakes/minimaxUpstream.ts";
import { VeoUpstream } from "./fakes/veoUpstream.ts";
import { reelayInProcess } from "./helpers/cliInProcess.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";

/**
 * What each vendor does differently, end to end against its fake: the exact create bodies and endpoints,
 * DashScope's async header, Kling's JWT (verified by the fake, signed anew after an expired-token answer),
 * MiniMax's three calls and callback challenge, Veo's inline images and keyed download; and a model whose
 * channels are two vendors, failing over from one to the other, each task billed once.
 */
const KEYS = {
  PROTO_DASHSCOPE_KEY: "sk-dashscope-proto",
  PROTO_KLING_AK: "kling-ak-proto",
  PROTO_KLING_SK: "kling-sk-proto",
  PROTO_MINIMAX_KEY: "minimax-proto",
  PROTO_VEO_KEY: "AIza-veo-proto",
  PROTO_ARK_KEY: "ark-proto",
};
Object.assign(process.env, KEYS);


/** A 1×1 PNG, as a customer may send an image inline. */
const PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const PNG_DATA_URL = `data:image/png;base64,${PNG_BASE64}`;

const fast = { coolDownMs: 60_000, pollFirstAfterMs: 0, pollEveryMs: 30, pollMaxEveryMs: 30, timeoutMs: 2_000 };

function model(config: ReelayConfig, name: string, provider: string | string[], upstreamModel: string | Record<string, string>, capabilities: VideoCapability[], defaultDurationSeconds: number): void {
  config.videoModels[name] = {
    provider,
    upstreamModel,
    upstreamPrice: 0.5,
    imageRole: "first_frame",
    enabled: true,
    capabilities,
    pricePerMillionTokens: 46,
    minDurationSeconds: 4,
    maxDurationSeconds: 15,
    defaultDurationSeconds,
  };
}

describe("each vendor's own protocol, and failover across vendors", () => {
  const dashscope = new DashScopeUpstream(KEYS.PROTO_DASHSCOPE_KEY);
  const kling = new KlingUpstream(KEYS.PROTO_KLING_AK, KEYS.PROTO_KLING_SK);
  const minimax = new MiniMaxUpstream(KEYS.PROTO_MINIMAX_KEY);
  const veo = new VeoUpstream(KEYS.PROTO_VEO_KEY);
  const mixedArk = new ArkUpstream(KEYS.PROTO_ARK_KEY);
  const mixedWan = new DashScopeUpstream(KEYS.PROTO_DASHSCOPE_KEY);
  const fakes = [dashscope, kling, minimax, veo, mixedArk, mixedWan];
  let app: TestApp;
  let client: VideoClient;

  beforeAll(async () => {
    await Promise.all(fakes.map((fake) => fake.start()));
    app = await startTestApp({
      tweak: (config) => {
        config.limits.maxTaskMs = 20_000;
        const entry = (settings: Record<string, unknown>) => ProviderSettings.parse({ ...fast, ...settings });
        config.providers.wan = entry({ kind: "dashscope", baseUrl: dashscope.baseUrl, apiKeyEnv: "PROTO_DASHSCOPE_KEY" });
        config.providers.kling = entry({ kind: "kling", baseUrl: kling.baseUrl, apiKeyEnv: "PROTO_KLING_AK", secretKeyEnv: "PROTO_KLING_SK" });
        config.providers.hailuo = entry({ kind: "minimax", baseUrl: minimax.baseUrl, apiKeyEnv: "PROTO_MINIMAX_KEY", publicCallbackUrl: "https://reelay.example" });
        config.providers.veo = entry({ kind: "veo", baseUrl: veo.baseUrl, apiKeyEnv: "PROTO_VEO_KEY", allowPrivateReferenceUrls: true });
        config.providers["mixed-ark"] = entry({ kind: "ark", baseUrl: mixedArk.baseUrl, apiKeyEnv: "PROTO_ARK_KEY", weight: 1000 });
        config.providers["mixed-wan"] = entry({ kind: "dashscope", baseUrl: mixedWan.baseUrl, apiKeyEnv: "PROTO_DASHSCOPE_KEY" });
        model(config, "Wan-t2v", "wan", "wan2.6-t2v", ["audio"], 5);
        model(config, "Wan-i2v", "wan", "wan2.6-i2v", ["image"], 5);
        model(config, "Kling", "kling", "kling-v2-5-turbo", ["image"], 5);
        model(config, "Hailuo", "hailuo", "MiniMax-Hailuo-2.3", ["image"], 6);
        model(config, "Veo", "veo", "veo-3.1-generate-preview", ["image"], 8);
        model(config, "Mixed", ["mixed-ark", "mixed-wan"], { "mixed-ark": "doubao-seedance-2-0-260128", "mixed-wan": "wan2.6-t2v" }, [], 5);
      },
    });
    client = new VideoClient(app.baseUrl, await app.keyFor("protocols", 1000));
  });
  afterAll(async () => {
    await app?.stop();
    await Promise.all(fakes.map((fake) => fake.stop()));
  });

  const create = async (body: Record<string, unknown>) => {
    const created = await client.create({ ratio: "16:9", ...body });
    return { ...created, taskId: created.body.data?.task_id as number };
  };
  const succeed = async (body: Record<string, unknown>) => {
    const { status, taskId } = await create(body);
    expect(status).toBe(200);
    const final = await client.waitForFinal(taskId, 15_000, 20);
    expect(final.body.data?.status).toBe("success");
    return { taskId, final };
  };
  const events = async (taskId: number): Promise<TaskEvent[]> => (await readTask(app.nats, taskId)).events;

  it("DashScope: text-to-video at the ratio's 720p size, image-to-video at 720P from img_url, always with X-DashScope-Async; usage read whether numbers or strings", async () => {
    await succeed({ model: "Wan-t2v", prompt: "wan text one" });
    await succeed({ model: "Wan-t2v", prompt: "wan text two", generate_audio: false });
    expect(dashscope.createsWithPrompt("wan text one")).toEqual([
      { model: "wan2.6-t2v", input: { prompt: "wan text one" }, parameters: { size: "1280*720", duration: 5, watermark: false, audio: true } },
    ]);
    expect(dashscope.createsWithPrompt("wan text two")[0]?.parameters?.audio).toBe(false);
    await succeed({ model: "Wan-i2v", prompt: "wan image", image_url: PNG_DATA_URL });
    expect(dashscope.createsWithPrompt("wan image")).toEqual([
      { model: "wan2.6-i2v", input: { prompt: "wan image", img_url: PNG_DATA_URL }, parameters: { resolution: "720P", duration: 5, watermark: false } },
    ]);
    expect(dashscope.syncRefusals).toBe(0);
    const withoutHeader = await fetch(`${dashscope.baseUrl}/services/aigc/video-generation/video-synthesis`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEYS.PROTO_DASHSCOPE_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "wan2.6-t2v", input: { prompt: "sync" } }),
    });
    expect(withoutHeader.status).toBe(403);
    expect(((await withoutHeader.json()) as { message: string }).message).toBe("current user api does not support synchronous calls");
    const usages = [];
    for (const prompt of ["wan text one", "wan text two"]) {
      const taskId = (await client.create({ model: "Wan-t2v", prompt: `${prompt} again` })).body.data?.task_id as number;
      await client.waitForFinal(taskId, 15_000, 20);
      usages.push((await events(taskId)).find((e) => e.type === "GenerationSucceeded")?.data);
    }
    expect(usages.map((usage) => (usage as { upstreamUsage?: unknown } | undefined)?.upstreamUsage)).toEqual([
      { unit: "seconds", amount: 5, costMicros: 2_500_000 },
      { unit: "seconds", amount: 5, costMicros: 2_500_000 },
    ]);
  });

  it("DashScope: a text-to-video ratio Wan has no size for is refused before it is sent", async () => {
    const { status, body } = await create({ model: "Wan-t2v", prompt: "wan wide", ratio: "21:9" });
    expect(status).toBe(400);
    expect(body.msg).toMatch(/Wan renders text-to-video at 16:9, 9:16, 1:1, 4:3 or 3:4, not 21:9/);
    expect(dashscope.createsWithPrompt("wan wide")).toEqual([]);
  });

  it("Kling: signed JWTs the fake verifies; text2video and image2video endpoints; our reference as external_task_id; duration as a string", async () => {
    const { taskId } = await succeed({ model: "Kling", prompt: "kling text" });
    expect(kling.createsWithPrompt("kling text")).toEqual([
      { model_name: "kling-v2-5-turbo", prompt: "kling text", mode: "std", duration: "5", external_task_id: `reelay-task-${taskId}`, aspect_ratio: "16:9" },
    ]);
    await succeed({ model: "Kling", prompt: "kling image", image_url: PNG_DATA_URL });
    // Kling takes raw base64 without the data: prefix, on the image2video endpoint (queried there too).
    expect(kling.createsWithPrompt("kling image")[0]).toMatchObject({ image: PNG_BASE64 });
    expect(kling.calls).toContain("POST /v1/videos/image2video");
    expect(kling.calls.some((call) => call.startsWith("GET /v1/videos/image2video/"))).toBe(true);
    const forged = await fetch(`${kling.baseUrl}/v1/videos/text2video/1`, { headers: { authorization: "Bearer not.a.jwt" } });
    expect(forged.status).toBe(401);
    expect(((await forged.json()) as { code: number }).code).toBe(1002);
  });

  it("Kling: a token Kling calls expired (1004) is signed anew and the call tried once more", async () => {
    kling.expireIssuedTokens();
    const refusedBefore = kling.expiredRefusals;
    const tokensBefore = kling.tokensSeen.size;
    await succeed({ model: "Kling", prompt: "kling after expiry" });
    expect(kling.expiredRefusals).toBe(refusedBefore + 1);
    expect(kling.tokensSeen.size).toBeGreaterThan(tokensBefore);
  });

  it("Kling: a duration Kling does not render is refused naming what it does", async () => {
    const { status, body } = await create({ model: "Kling", prompt: "kling seven", duration: 7 });
    expect(status).toBe(400);
    expect(body.msg).toMatch(/Kling renders 5 or 10 seconds, not 7/);
  });

  it("MiniMax: create, query, then the file id resolved to its download address; 768P billed as delivered", async () => {
    const callsBefore = minimax.calls.length;
    const { final } = await succeed({ model: "Hailuo", prompt: "hailuo text" });
    expect(minimax.createsWithPrompt("hailuo text")).toEqual([{ model: "MiniMax-Hailuo-2.3", prompt: "hailuo text", duration: 6, resolution: "768P", aigc_watermark: false, callback_url: "https://reelay.example/hooks/upstream/hailuo" }]);
    const calls = new Set(minimax.calls.slice(callsBefore));
    expect(calls).toEqual(new Set(["POST /v1/video_generation", "GET /v1/query/video_generation", "GET /v1/files/retrieve"]));
    expect(final.body.data).toMatchObject({ resolution: "1366*768", duration: 6 });
    const { status, body } = await create({ model: "Hailuo", prompt: "hailuo tall", ratio: "9:16" });
    expect(status).toBe(400);
    expect(body.msg).toMatch(/MiniMax renders text-to-video at 16:9 only, not 9:16/);
  });

  it("MiniMax: the callback address answers MiniMax's challenge, and a status callback is taken as a hint", async () => {
    const challenge = await fetch(`${app.baseUrl}/hooks/upstream/hailuo`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ challenge: "1a2b3c" }) });
    expect(await challenge.json()).toEqual({ challenge: "1a2b3c" });
    const news = await fetch(`${app.baseUrl}/hooks/upstream/hailuo`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ task_id: 106916112212032, status: "success" }) });
    expect(news.status).toBe(200);
    const noCallbacks = await fetch(`${app.baseUrl}/hooks/upstream/wan`, { method: "POST", body: "{}" });
    expect(noCallbacks.status).toBe(404);
  });

  it("Veo: an image goes inline as base64; the video is downloaded with the key, which the fake requires", async () => {
    await succeed({ model: "Veo", prompt: "veo image", image_url: PNG_DATA_URL, ratio: "9:16" });
    expect(veo.createsWithPrompt("veo image")).toEqual([
      { instances: [{ prompt: "veo image", image: { bytesBase64Encoded: PNG_BASE64, mimeType: "image/png" } }], parameters: { aspectRatio: "9:16", durationSeconds: 8, resolution: "720p", sampleCount: 1 } },
    ]);
    expect(veo.keylessDownloads).toBe(0);
    const task = veo.tasksWithPrompt("veo image")[0];
    const keyless = await fetch(`${veo.baseUrl}/results/${encodeURIComponent(task?.id ?? "")}.mp4?alt=media`);
    expect(keyless.status).toBe(403);
    const { status, body } = await create({ model: "Veo", prompt: "veo five", duration: 5 });
    expect(status).toBe(400);
    expect(body.msg).toMatch(/Veo renders 4, 6 or 8 seconds, not 5/);
  });

  it("Veo: a failed operation's error is read whether Google sends an object or a bare string", async () => {
    const reasons = [];
    for (const n of [1, 2]) {
      const { taskId } = await create({ model: "Veo", prompt: `veo #fail ${n}` });
      reasons.push((await client.waitForFinal(taskId, 15_000, 20)).body.msg);
    }
    expect(reasons).toEqual([
      "video generation failed upstream: Video generation failed due to an internal problem with the model.; no charge was made",
      "video generation failed upstream: Video generation failed due to an internal problem with the model.; no charge was made",
    ]);
  });

  it("a model on Seedance and Wan keeps serving when Ark answers 5xx or its account is overdue; each task runs once and is billed once", async () => {
    mixedArk.down = true;
    const whileDown = await Promise.all([1, 2, 3].map((n) => succeed({ model: "Mixed", prompt: `mixed down ${n}` })));
    mixedArk.down = false;
    mixedArk.scriptCreates("overdue");
    const whileOverdue = await succeed({ model: "Mixed", prompt: "mixed overdue" });
    for (const { taskId } of [...whileDown, whileOverdue]) {
      const log = await events(taskId);
      expect(log.find((e) => e.type === "UpstreamAccepted")?.data).toMatchObject({ channel: "mixed-wan" });
      expect(log.filter((e) => e.type === "GenerationSucceeded")).toHaveLength(1);
    }
    expect(mixedWan.createBodies.map((body) => body.model)).toEqual(["wan2.6-t2v", "wan2.6-t2v", "wan2.6-t2v", "wan2.6-t2v"]);
    expect(mixedArk.tasks.size).toBe(0);
    const audit = await reelayInProcess(app, "audit", "upstream", "--json");
    const rows = JSON.parse(audit.stdout) as Array<{ model: string; channel: string; succeeded: number; upstreamSeconds: number; upstreamCostMicros: number; chargedMicros: number }>;
    expect(rows.find((row) => row.model === "Mixed" && row.channel === "mixed-wan")).toMatchObject({ succeeded: 4, upstreamSeconds: 20, upstreamCostMicros: 10_000_000 });
    // Settlement is written behind the tasks' ends (grouped per account for 100 ms).
    await expect.poll(async () => (await app.ledger.current("protocols")).reservedMicros).toBe(0);
  });
});
