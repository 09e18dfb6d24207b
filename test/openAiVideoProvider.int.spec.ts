import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProviderSettings } from "../contracts/config.ts";
import { fleetChannelReports } from "../services/shared/channelReports.ts";
import { FAKE_MP4, OpenAiVideosUpstream } from "./fakes/openAiVideosUpstream.ts";
import { reelayInProcess } from "./helpers/cliInProcess.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";
import { availableOnceSettled } from "./helpers/settledMoney.ts";

const KEY_VARIABLE = "REELAY_TEST_OPENAI_VIDEO_KEY";
const PNG_1X1 =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/** The `openai` provider against a fake of OpenAI's Videos API, through reelay's own API as a customer sees it. */
describe("openai video provider", () => {
  const upstream = new OpenAiVideosUpstream("sk-upstream-test");
  let app: TestApp;
  let client: VideoClient;
  let account: string;

  beforeAll(async () => {
    await upstream.start();
    process.env[KEY_VARIABLE] = "sk-upstream-test";
    app = await startTestApp({
      tweak: (config) => {
        config.providers.sora = ProviderSettings.parse({
          kind: "openai",
          baseUrl: upstream.baseUrl,
          apiKeyEnv: KEY_VARIABLE,
          model: "sora-2",
          pollFirstAfterMs: 0,
          pollEveryMs: 20,
          pollMaxEveryMs: 40,
          timeoutMs: 2_000,
          allowPrivateReferenceUrls: true,
        });
        const mini = config.videoModels["VideoModel-2.0-mini"];
        if (mini) {
          mini.provider = "sora";
          mini.capabilities = ["image"];
        }
        config.limits.maxTaskMs = 10_000;
      },
    });
    account = "openai-relay";
    client = new VideoClient(app.baseUrl, await app.keyFor(account, 100));
  });
  afterAll(async () => {
    await app?.stop();
    await upstream.stop();
  });

  const available = async () => {
    const state = await app.ledger.current(account);
    return state.balanceMicros - state.reservedMicros;
  };
  const create = (body: Record<string, unknown> = {}) => client.create({ model: "VideoModel-2.0-mini", prompt: "a fox in snow", duration: 4, ...body });

  it("relays a create as multipart, polls to completion, copies the content, and deletes the upstream's copy", async () => {
    upstream.generation = { kind: "succeed", after: 2 };
    const created = await create({ image_url: PNG_1X1 });
    expect(created.status).toBe(200);
    const providerTaskId = created.body.data?.provider_task_id;
    expect(providerTaskId).toMatch(/^video_/);
    const done = await client.waitForFinal(created.body.data?.task_id as number, 10_000, 20);
    expect(done.body.data).toMatchObject({ status: "success", duration: 4, resolution: "1280*720" });

    const sent = upstream.creates.at(-1);
    expect(sent?.fields).toEqual({ model: "sora-2", prompt: "a fox in snow", seconds: "4", size: "1280x720" });
    expect(sent?.reference?.bytes.subarray(1, 4).toString("latin1")).toBe("PNG");

    const video = await fetch(String(done.body.data?.video_url));
    expect(Buffer.from(await video.arrayBuffer())).toEqual(FAKE_MP4);
    await expect.poll(() => upstream.deletes.includes(String(providerTaskId))).toBe(true);

    // The upstream's progress (33, then 67: 100·polls/3, rounded) is recorded on the task in steps.
    const { events } = await readTask(app.nats, created.body.data?.task_id as number);
    expect(events.filter((event) => event.type === "GenerationProgressed").map((event) => event.data)).toEqual([{ progress: 33 }, { progress: 67 }]);
  });

  it("a generation the upstream fails (moderation) fails the task with its reason and charges nothing", async () => {
    const before = await availableOnceSettled(app.ledger, account);
    upstream.generation = { kind: "fail", after: 1, code: "moderation_blocked", message: "Your request was blocked by our moderation system." };
    const created = await create();
    const done = await client.waitForFinal(created.body.data?.task_id as number, 10_000, 20);
    expect(done.body).toMatchObject({ code: 500, msg: "video generation failed: Your request was blocked by our moderation system." });
    await expect.poll(available).toBe(before);
  });

  it("rate-limited and failing creates are retried; the task still succeeds", async () => {
    upstream.generation = { kind: "succeed", after: 1 };
    const attempts = upstream.creates.length;
    upstream.scriptCreates("429", "500");
    const created = await create();
    const done = await client.waitForFinal(created.body.data?.task_id as number, 10_000, 20);
    expect(done.body.data?.status).toBe("success");
    expect(upstream.creates.length - attempts).toBe(1); // the 429 and 500 answer before the body is read
  });

  it("a value the upstream refuses answers 400 with its message, and nothing stays reserved", async () => {
    const before = await availableOnceSettled(app.ledger, account);
    const created = await create({ duration: 5 });
    expect(created.status).toBe(400);
    expect(created.body.msg).toMatch(/seconds|'5'/);
    await expect.poll(available).toBe(before);
  });

  it("content that expired before the copy fails the task, free", async () => {
    const before = await availableOnceSettled(app.ledger, account);
    upstream.generation = { kind: "succeed", after: 1 };
    upstream.contentLifetimeMs = -1;
    try {
      const created = await create();
      const done = await client.waitForFinal(created.body.data?.task_id as number, 10_000, 20);
      expect(done.body).toMatchObject({ code: 500 });
      expect(done.body.msg).toMatch(/no longer available/);
      await expect.poll(available).toBe(before);
    } finally {
      upstream.contentLifetimeMs = Number.POSITIVE_INFINITY;
    }
  });

  it("a key the upstream refuses fails the task as unavailable, free, without leaking the key", async () => {
    const before = await availableOnceSettled(app.ledger, account);
    process.env[KEY_VARIABLE] = "sk-wrong";
    // The provider reads the key at start: a second app sees the wrong one.
    const other = await startTestApp({
      tweak: (config) => {
        config.providers.sora = ProviderSettings.parse({ kind: "openai", baseUrl: upstream.baseUrl, apiKeyEnv: KEY_VARIABLE, model: "sora-2", pollEveryMs: 20, allowPrivateReferenceUrls: true });
        const mini = config.videoModels["VideoModel-2.0-mini"];
        if (mini) mini.provider = "sora";
      },
    });
    try {
      const otherClient = new VideoClient(other.baseUrl, await other.keyFor("wrong-key", 100));
      const created = await otherClient.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 });
      const done = created.status === 200 ? await otherClient.waitForFinal(created.body.data?.task_id as number, 10_000, 20) : created;
      expect(done.body.msg).toMatch(/not available/);
      expect(JSON.stringify(done.body)).not.toMatch(/sk-/);
    } finally {
      await other.stop();
      process.env[KEY_VARIABLE] = "sk-upstream-test";
    }
    expect(await available()).toBe(before);
  });

  const channelReport = async () => {
    return (await fleetChannelReports(app.nats)).find((channel) => channel.channel === "sora");
  };

  it("an upstream without DELETE (LiteLLM's proxy): the video is ours all the same, and reelay channels shows why its copy stays", async () => {
    upstream.generation = { kind: "succeed", after: 1 };
    upstream.deleteSupported = false;
    try {
      const created = await create();
      const done = await client.waitForFinal(created.body.data?.task_id as number, 10_000, 20);
      expect(done.body.data?.status).toBe("success");
      await expect.poll(async () => (await channelReport())?.cleanupFailures?.last.message).toBe(
        "the upstream does not support DELETE /videos/{id}: unsupported operation (HTTP 405): HTTP 405",
      );
      expect((await channelReport())?.state).toBe("in rotation");
      const { stdout } = await reelayInProcess(app, "channels");
      // Every row's columns where the header's are, whatever the width of a kind ("openai-videos") or a name.
      const [header = "", ...rows] = stdout.split("\n").filter((line) => line !== "" && !line.startsWith("    "));
      for (const column of ["kind", "state"]) {
        const at = header.indexOf(column);
        for (const row of rows) expect(`${row.slice(at - 1, at + 2)}|${row}`).toMatch(/^ \S/);
      }
      expect(stdout).toMatch(/clean-up failed \d+ time\(s\), the upstream's copies stay \(last [^)]+\): the upstream does not support DELETE \/videos\/\{id\}: unsupported operation \(HTTP 405\)/);
    } finally {
      upstream.deleteSupported = true;
    }
  });

  // Last: it takes the channel out of rotation for its cool-down.
  it("an upstream whose account has no balance (429 insufficient_quota) fails the task free, and the channel cools down saying so, not 'refused our key'", async () => {
    const before = await availableOnceSettled(app.ledger, account);
    upstream.scriptCreates("quota");
    const created = await create();
    const done = created.status === 200 ? await client.waitForFinal(created.body.data?.task_id as number, 10_000, 20) : created;
    expect(done.body.msg).toMatch(/not available/);
    // The channel's record is written beside the task's end, not before it: read it once it is there.
    await expect.poll(async () => (await channelReport())?.state).toBe("cooling down");
    const report = await channelReport();
    expect(report?.recentErrors.at(-1)?.message).toBe(
      "the upstream has no balance for our key (POST /videos): no balance (HTTP 429 insufficient_quota): You exceeded your current quota, please check your plan and billing details.",
    );
    await expect.poll(available).toBe(before);
  });
});
