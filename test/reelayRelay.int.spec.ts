import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProviderSettings } from "../contracts/config.ts";
import { arkSampleVideo } from "./fakes/arkUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";

/**
 * One reelay relaying to another through the `openai` provider and the OpenAI Videos API: the downstream's
 * runner creates on the upstream's `/api/compat/videos` (multipart), polls it, copies its content with the
 * key, records the upstream's seconds and price, and deletes the upstream's copy. Both ledgers are right.
 */
const RELAY_KEY_VARIABLE = "RELAY_TEST_UPSTREAM_REELAY_KEY";

describe("reelay → reelay through the OpenAI Videos API", () => {
  let upstream: TestApp;
  let downstream: TestApp;
  let client: VideoClient;

  beforeAll(async () => {
    // The upstream reelay generates on the instant scripted vendor (a real MP4, no render).
    upstream = await startTestApp({ providers: () => new ScriptedVendor({}, arkSampleVideo()) });
    process.env[RELAY_KEY_VARIABLE] = await upstream.keyFor("downstream-reelay", 100);
    downstream = await startTestApp({
      tweak: (config) => {
        config.providers["upstream-reelay"] = ProviderSettings.parse({
          kind: "openai",
          baseUrl: `${upstream.baseUrl}/api/compat`,
          apiKeyEnv: RELAY_KEY_VARIABLE,
          model: "VideoModel-2.0-mini",
          pollFirstAfterMs: 0,
          pollEveryMs: 50,
          pollMaxEveryMs: 50,
          timeoutMs: 5_000,
        });
        config.videoModels.Relayed = {
          provider: "upstream-reelay",
          upstreamPrice: 0.25,
          imageRole: "first_frame",
          enabled: true,
          capabilities: [],
          pricePerMillionTokens: 30,
          minDurationSeconds: 4,
          maxDurationSeconds: 15,
          defaultDurationSeconds: 4,
        };
      },
    });
    client = new VideoClient(downstream.baseUrl, await downstream.keyFor("end-customer", 100));
  });
  afterAll(async () => {
    await downstream?.stop();
    await upstream?.stop();
    delete process.env[RELAY_KEY_VARIABLE];
  });

  it("a task on the downstream runs on the upstream; the video, the charges and the upstream's cost all line up", async () => {
    const created = await client.create({ model: "Relayed", prompt: "a relayed fox", duration: 4, ratio: "16:9" });
    expect(created.status).toBe(200);
    const final = await client.waitForFinal(created.body.data?.task_id as number, 20_000, 50);
    expect(final.body.data).toMatchObject({ status: "success", duration: 4, resolution: "1280*720" });
    const providerTaskId = String(final.body.data?.provider_task_id);
    expect(providerTaskId).toMatch(/^video_\d+$/);

    // The upstream ran it for the downstream's account, and the downstream deleted the upstream's copy.
    const upstreamTaskId = Number(providerTaskId.slice(6));
    // The delete follows the downstream task's end (the runner forgets the upstream task after settling it).
    await expect.poll(async () => (await readTask(upstream.nats, upstreamTaskId)).events.map((event) => event.type)).toEqual([
      "TaskSubmitted",
      "UpstreamAccepted",
      "GenerationSucceeded",
      "VideoDeleted",
    ]);
    const upstreamEvents = (await readTask(upstream.nats, upstreamTaskId)).events;
    const upstreamSubmitted = upstreamEvents[0];
    expect(upstreamSubmitted?.type === "TaskSubmitted" && upstreamSubmitted.data).toMatchObject({ account: "downstream-reelay", job: { model: "VideoModel-2.0-mini", prompt: "a relayed fox", durationSeconds: 4 } });

    // The bytes went from the upstream's store to the downstream's unchanged.
    const video = Buffer.from(await (await fetch(String(final.body.data?.video_url))).arrayBuffer());
    expect(video.equals(arkSampleVideo())).toBe(true);

    const downstreamEvents = (await readTask(downstream.nats, final.body.data?.task_id as number)).events;
    expect(downstreamEvents.find((event) => event.type === "GenerationSucceeded")?.data).toMatchObject({ upstreamUsage: { unit: "seconds", amount: 4, costMicros: 1_000_000 } });
    await expect.poll(async () => (await downstream.ledger.current("end-customer")).reservedMicros).toBe(0);
    await expect.poll(async () => (await upstream.ledger.current("downstream-reelay")).reservedMicros).toBe(0);
    expect((await downstream.ledger.current("end-customer")).balanceMicros).toBe(100_000_000 - Math.round(Number(final.body.data?.cost) * 1_000_000));
    expect((await upstream.ledger.current("downstream-reelay")).balanceMicros).toBeLessThan(100_000_000);
  });
});
