import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProviderSettings } from "../contracts/config.ts";
import { FAKE_MP4, OpenAiVideosUpstream } from "./fakes/openAiVideosUpstream.ts";
import { videoNameKey, videoObjectName } from "../services/runner/videoNames.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const KEY_VARIABLE = "REELAY_TEST_STORAGE_NAMES_KEY";
/** What a LiteLLM proxy answers as a video id: its own prefix and the provider's id, encoded (222 characters). */
const LITELLM_ID = `video_${"bGl0ZWxsbTpjdXN0b21fbGxtX3Byb3ZpZGVyOm9wZW5haTttb2RlbF9pZDp2aWRlb182OGE".repeat(4)}`.slice(0, 222);

/** A distinct MP4 per upstream, so a copy that overwrote another's shows. */
const mp4Saying = (text: string) => Buffer.concat([FAKE_MP4, Buffer.from(text)]);

/** Issue 32, stored videos: what reelay names its copies, and that a success is always servable. */
describe("adversarial storage: names of stored videos", () => {
  const upstreamA = new OpenAiVideosUpstream("sk-a");
  const upstreamB = new OpenAiVideosUpstream("sk-b");
  let app: TestApp;
  let client: VideoClient;
  let key: string;

  beforeAll(async () => {
    await Promise.all([upstreamA.start(), upstreamB.start()]);
    upstreamA.content = mp4Saying("from upstream A");
    upstreamB.content = mp4Saying("from upstream B");
    process.env[KEY_VARIABLE] = "sk-a";
    process.env[`${KEY_VARIABLE}_B`] = "sk-b";
    const channel = (baseUrl: string, apiKeyEnv: string) =>
      ProviderSettings.parse({ kind: "openai", baseUrl, apiKeyEnv, model: "sora-2", pollFirstAfterMs: 0, pollEveryMs: 20, pollMaxEveryMs: 40, timeoutMs: 2_000 });
    app = await startTestApp({
      tweak: (config) => {
        config.providers.soraA = channel(upstreamA.baseUrl, KEY_VARIABLE);
        config.providers.soraB = channel(upstreamB.baseUrl, `${KEY_VARIABLE}_B`);
        for (const [model, provider] of [["VideoModel-2.0-mini", "soraA"], ["VideoModel-2.0-fast", "soraB"]] as const) {
          const entry = config.videoModels[model];
          if (entry) entry.provider = provider;
        }
        config.limits.maxTaskMs = 10_000;
      },
    });
    key = await app.keyFor("names", 100);
    client = new VideoClient(app.baseUrl, key);
  });
  afterAll(async () => {
    await app?.stop();
    await Promise.all([upstreamA.stop(), upstreamB.stop()]);
  });

  const run = async (model: string) => {
    const created = await client.create({ model, prompt: "a fox", duration: 4 });
    expect(created.status).toBe(200);
    return client.waitForFinal(created.body.data?.task_id as number, 10_000, 20);
  };
  const objectOf = (videoUrl: unknown) => decodeURIComponent(new URL(String(videoUrl)).pathname.slice("/videos/".length));

  it("charged for a video nobody can download: a 222-character upstream id (LiteLLM) still ends in a servable copy", async () => {
    upstreamA.nextIds.push(LITELLM_ID);
    const done = await run("VideoModel-2.0-mini");
    expect(done.body.data).toMatchObject({ status: "success" });
    const videoId = `video_${String(done.body.data?.task_id)}`;
    const [byUrl, byContent] = await Promise.all([
      fetch(String(done.body.data?.video_url)),
      fetch(`${app.baseUrl}/v1/videos/${videoId}/content`, { headers: { authorization: `Bearer ${key}` } }),
    ]);
    expect([byUrl.status, byContent.status]).toEqual([200, 200]);
    expect(Buffer.from(await byUrl.arrayBuffer())).toEqual(upstreamA.content);
  });

  it("stored videos can be guessed: names are reelay's own (bounded, random, never the upstream's id), and two upstreams' equal ids never share a copy", async () => {
    // Behind another reelay every id is video_<n>: both upstreams hand out the same one.
    upstreamA.nextIds.push("video_1");
    upstreamB.nextIds.push("video_1");
    const [fromA, fromB] = await Promise.all([run("VideoModel-2.0-mini"), run("VideoModel-2.0-fast")]);
    expect([fromA.body.data?.status, fromB.body.data?.status]).toEqual(["success", "success"]);
    const names = [objectOf(fromA.body.data?.video_url), objectOf(fromB.body.data?.video_url)];
    for (const name of names) {
      expect(name).not.toContain("video_1");
      // At least 128 random bits: 22 or more base64url characters before the extension, in a bounded name.
      expect(name).toMatch(/^[A-Za-z0-9_-]{22,64}\.mp4$/);
    }
    expect(names[0]).not.toBe(names[1]);
    const bodies = await Promise.all([fromA, fromB].map(async (done) => Buffer.from(await (await fetch(String(done.body.data?.video_url))).arrayBuffer())));
    expect(bodies).toEqual([upstreamA.content, upstreamB.content]);
  });

  it("a task's name is decided once: every runner, and every retry of the copy, derives the same one from the stored key", async () => {
    const [key1, key2] = await Promise.all([videoNameKey(app.nats.secrets), videoNameKey(app.nats.secrets)]);
    expect(key1).toEqual(key2);
    expect(videoObjectName(key1, 42)).toBe(videoObjectName(key2, 42));
    expect(videoObjectName(key1, 42)).not.toBe(videoObjectName(key1, 43));
  });
});
