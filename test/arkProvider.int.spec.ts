import { fleetChannelReports } from "../services/shared/channelReports.ts";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../contracts/videoTask.ts";
import { ArkUpstream, arkSampleVideo } from "./fakes/arkUpstream.ts";
import { addArk } from "./helpers/arkChannels.ts";
import { reelayInProcess } from "./helpers/cliInProcess.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { readTask } from "./helpers/taskReads.ts";
import { availableOnceSettled } from "./helpers/settledMoney.ts";

/**
 * Seedance through the Ark adapter, end to end: the real edge, runner and ledger against the fake Ark
 * server (test/fakes/arkUpstream.ts), which speaks Ark's task API. Key variables are unique to this file:
 * test files share worker processes.
 */
const KEYS = { ARK_TEST_KEY_A: "ark-key-a", ARK_TEST_KEY_B: "ark-key-b", ARK_TEST_KEY_PAIR: "ark-key-pair", ARK_TEST_KEY_CB: "ark-key-cb", ARK_TEST_KEY_WRONG: "not-the-key" };
Object.assign(process.env, KEYS);
delete process.env.ARK_TEST_KEY_UNSET;


/** 1280·720·(24·5+1)/1024: what Ark reports for 5 s at 720p 16:9 (vendors doc A.8). */
const FIVE_SECONDS_720P = 108_900;

describe("Seedance on Ark (fake Ark server)", () => {
  const arkA = new ArkUpstream(KEYS.ARK_TEST_KEY_A);
  const arkB = new ArkUpstream(KEYS.ARK_TEST_KEY_B);
  const pair = new ArkUpstream(KEYS.ARK_TEST_KEY_PAIR);
  const callbacks = new ArkUpstream(KEYS.ARK_TEST_KEY_CB);
  const slowArk = new ArkUpstream(KEYS.ARK_TEST_KEY_A);
  let app: TestApp;
  let slow: TestApp;
  let forwarder: Server;
  let client: VideoClient;

  beforeAll(async () => {
    await Promise.all([arkA, arkB, pair, callbacks, slowArk].map((fake) => fake.start()));
    // Ark calls back to a public address fixed before the edge has its port: a forwarder stands in for it.
    let edgeUrl = "";
    forwarder = createServer((req, res) => {
      void (async () => {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const answer = await fetch(`${edgeUrl}${req.url ?? "/"}`, { method: "POST", headers: { "content-type": "application/json" }, body: Buffer.concat(chunks) });
        res.writeHead(answer.status).end(await answer.text());
      })();
    });
    await new Promise<void>((resolve) => forwarder.listen(0, "127.0.0.1", resolve));
    const publicCallbackUrl = `http://127.0.0.1:${(forwarder.address() as AddressInfo).port}`;
    [app, slow] = await Promise.all([
      startTestApp({
        tweak: (config) => {
          config.limits.maxTaskMs = 20_000;
          addArk(
            config,
            {
              "ark-a": { baseUrl: arkA.baseUrl, apiKeyEnv: "ARK_TEST_KEY_A" },
              // Chosen by weight among free channels: the failover model's tasks go to ark-wrong-key first (1000 to
              // 0.001), not one in a thousand straight to ark-b (a run where ark-wrong-key was never tried failed).
              "ark-b": { baseUrl: arkB.baseUrl, apiKeyEnv: "ARK_TEST_KEY_B", weight: 0.001 },
              "pair-1": { baseUrl: pair.baseUrl, apiKeyEnv: "ARK_TEST_KEY_PAIR", maxInFlight: 1 },
              "pair-2": { baseUrl: pair.baseUrl, apiKeyEnv: "ARK_TEST_KEY_PAIR", maxInFlight: 1 },
              "ark-wrong-key": { baseUrl: arkB.baseUrl, apiKeyEnv: "ARK_TEST_KEY_WRONG", weight: 1000 },
              "ark-no-key": { baseUrl: arkA.baseUrl, apiKeyEnv: "ARK_TEST_KEY_UNSET" },
              "ark-cb": { baseUrl: callbacks.baseUrl, apiKeyEnv: "ARK_TEST_KEY_CB", publicCallbackUrl, pollFirstAfterMs: 60_000, pollEveryMs: 60_000 },
            },
            {
              Seedance: { provider: "ark-a" },
              "Seedance-reference": { provider: "ark-a", imageRole: "reference_image" },
              "Seedance-text": { provider: "ark-a", capabilities: [] },
              "Seedance-pair": { provider: ["pair-1", "pair-2"] },
              "Seedance-failover": { provider: ["ark-wrong-key", "ark-b"] },
              "Seedance-no-key": { provider: "ark-no-key" },
              "Seedance-callback": { provider: "ark-cb" },
            },
          );
        },
      }),
      startTestApp({
        tweak: (config) => {
          config.limits.maxTaskMs = 2_000;
          config.limits.submitWaitMs = 500;
          addArk(config, { "ark-slow": { baseUrl: slowArk.baseUrl, apiKeyEnv: "ARK_TEST_KEY_A", timeoutMs: 500 } }, { Seedance: { provider: "ark-slow" } });
        },
      }),
    ]);
    edgeUrl = app.baseUrl;
    client = new VideoClient(app.baseUrl, await app.keyFor("seedance", 1000));
  });
  afterAll(async () => {
    await Promise.all([app?.stop(), slow?.stop()]);
    forwarder?.close();
    await Promise.all([arkA, arkB, pair, callbacks, slowArk].map((fake) => fake.stop()));
  });

  const create = async (body: Record<string, unknown>, c: VideoClient = client) => {
    const created = await c.create({ prompt: "a fox in the snow", duration: 5, ...body });
    return { ...created, taskId: created.body.data?.task_id as number };
  };
  const available = async (a: TestApp, account: string) => {
    const state = await a.ledger.current(account);
    return state.balanceMicros - state.reservedMicros;
  };
  const events = async (a: TestApp, taskId: number): Promise<TaskEvent[]> => (await readTask(a.nats, taskId)).events;

  it("creates on Ark's task API with every field explicit, and delivers the vendor's bytes from reelay's own address, billed from Ark's usage", async () => {
    arkA.generation = { kind: "succeed", afterPolls: 2 };
    const { status, taskId } = await create({ model: "Seedance", image_url: "https://example.com/cat.png", ratio: "16:9" });
    expect(status).toBe(200);
    expect(arkA.createsFor(`reelay-task-${taskId}`)).toEqual([
      {
        model: "doubao-seedance-2-0-260128",
        content: [
          { type: "text", text: "a fox in the snow" },
          { type: "image_url", image_url: { url: "https://example.com/cat.png" }, role: "first_frame" },
        ],
        ratio: "16:9",
        duration: 5,
        resolution: "720p",
        generate_audio: true,
        watermark: false,
        safety_identifier: `reelay-task-${taskId}`,
      },
    ]);
    const final = await client.waitForFinal(taskId, 15_000, 20);
    expect(final.body.data).toMatchObject({ status: "success", total_tokens: FIVE_SECONDS_720P, duration: 5, resolution: "1280*720" });
    expect(final.body.data?.provider_task_id).toMatch(/^cgt-\d{14}-[0-9a-f]{5}$/);
    const videoUrl = String(final.body.data?.video_url);
    expect(videoUrl.startsWith(app.baseUrl)).toBe(true);
    const video = Buffer.from(await (await fetch(videoUrl)).arrayBuffer());
    expect(video.equals(arkSampleVideo())).toBe(true);
    const log = await events(app, taskId);
    expect(log.find((e) => e.type === "UpstreamAccepted")?.data).toEqual({ providerTaskId: final.body.data?.provider_task_id, channel: "ark-a" });
    expect(log.find((e) => e.type === "GenerationSucceeded")?.data).toMatchObject({ totalTokens: FIVE_SECONDS_720P, upstreamTokens: FIVE_SECONDS_720P });
  });

  it("without usage from Ark, design.md's estimate is billed (from the reported duration and frame size)", async () => {
    arkA.reportUsage = false;
    const { taskId } = await create({ model: "Seedance", ratio: "9:16", duration: 4 });
    const final = await client.waitForFinal(taskId, 15_000, 20);
    arkA.reportUsage = true;
    // 720·1280·(24·4+1)/1024
    expect(final.body.data).toMatchObject({ status: "success", total_tokens: 87_300, resolution: "720*1280", duration: 4 });
    expect((await events(app, taskId)).find((e) => e.type === "GenerationSucceeded")?.data).not.toHaveProperty("upstreamTokens");
  });

  it("sends the image as a reference where the model says so, and drops references the model cannot take", async () => {
    const reference = await create({ model: "Seedance-reference", image_url: "https://example.com/cat.png" });
    expect(arkA.createsFor(`reelay-task-${reference.taskId}`)[0]?.content[1]).toEqual({ type: "image_url", image_url: { url: "https://example.com/cat.png" }, role: "reference_image" });
    const text = await create({ model: "Seedance-text", image_url: "https://example.com/cat.png", video_url: "https://example.com/v.mp4" });
    expect(arkA.createsFor(`reelay-task-${text.taskId}`)[0]?.content).toEqual([{ type: "text", text: "a fox in the snow" }]);
    await Promise.all([reference, text].map((task) => client.waitForFinal(task.taskId, 15_000, 20)));
  });

  it("a generation Ark's moderation blocks fails with a reason the customer can read, and costs nothing", async () => {
    const before = await availableOnceSettled(app.ledger, "seedance");
    arkA.generation = { kind: "fail", afterPolls: 2, code: "OutputVideoSensitiveContentDetected.PolicyViolation", message: "The request failed because the output video may be related to copyright restrictions." };
    const { taskId } = await create({ model: "Seedance" });
    const final = await client.waitForFinal(taskId, 15_000, 20);
    arkA.generation = { kind: "succeed", afterPolls: 1 };
    expect(final.body.code).toBe(500);
    expect(final.body.msg).toMatch(/content policy/);
    expect(final.body.msg).not.toMatch(/Request id|cgt-|OutputVideo/);
    await expect.poll(() => available(app, "seedance"), { timeout: 5_000 }).toBe(before);
  });

  it("an expired task fails and is free; so does one cancelled at Ark", async () => {
    const before = await availableOnceSettled(app.ledger, "seedance");
    arkA.generation = { kind: "expire", afterPolls: 2 };
    const expired = await create({ model: "Seedance" });
    const expiredFinal = await client.waitForFinal(expired.taskId, 15_000, 20);
    expect(expiredFinal.body.msg).toMatch(/expired/);

    arkA.generation = { kind: "never" };
    const cancelled = await create({ model: "Seedance" });
    await expect.poll(() => arkA.taskFor(`reelay-task-${cancelled.taskId}`)).toBeDefined();
    const upstream = arkA.taskFor(`reelay-task-${cancelled.taskId}`);
    if (upstream) upstream.status = "cancelled";
    const cancelledFinal = await client.waitForFinal(cancelled.taskId, 15_000, 20);
    arkA.generation = { kind: "succeed", afterPolls: 1 };
    expect(cancelledFinal.body.msg).toMatch(/cancelled/);
    await expect.poll(() => available(app, "seedance"), { timeout: 5_000 }).toBe(before);
  });

  it("a status Ark may add one day never ends a task: it is polled on until a known one comes", async () => {
    arkA.generation = { kind: "never" };
    const { taskId } = await create({ model: "Seedance" });
    await expect.poll(() => arkA.taskFor(`reelay-task-${taskId}`)).toBeDefined();
    const upstream = arkA.taskFor(`reelay-task-${taskId}`);
    if (!upstream) throw new Error("no upstream task");
    upstream.status = "suspended";
    const polled = arkA.statusCalls.get(upstream.id) ?? 0;
    await expect.poll(() => arkA.statusCalls.get(upstream.id) ?? 0).toBeGreaterThan(polled + 3);
    expect((await client.query(taskId)).body.data?.status).toMatch(/pending|running/);
    upstream.status = "succeeded";
    arkA.generation = { kind: "succeed", afterPolls: 1 };
    expect((await client.waitForFinal(taskId, 15_000, 20)).body.data?.status).toBe("success");
  });

  it("input Ark's moderation refuses answers create with 400 and costs nothing", async () => {
    const before = await availableOnceSettled(app.ledger, "seedance");
    arkA.scriptCreates("moderation");
    const { status, body } = await create({ model: "Seedance" });
    expect(status).toBe(400);
    expect(body.msg).toMatch(/content policy/);
    await expect.poll(() => available(app, "seedance"), { timeout: 5_000 }).toBe(before);
  });

  it("a 429 storm and 500s delay tasks but none fails, and each is created once", async () => {
    arkA.scriptCreates("429", "429", "500", "429", "429", "500");
    arkA.failStatusCalls("429", "500", "429");
    const tasks = await Promise.all([1, 2, 3].map(() => create({ model: "Seedance" })));
    const finals = await Promise.all(tasks.map((task) => client.waitForFinal(task.taskId, 20_000, 20)));
    expect(finals.map((final) => final.body.data?.status)).toEqual(["success", "success", "success"]);
    for (const task of tasks) expect(arkA.createsFor(`reelay-task-${task.taskId}`)).toHaveLength(1);
  });

  it("an answer lost after Ark created the task never makes a second Ark task", async () => {
    arkA.scriptCreates("acceptThenLoseAnswer");
    const { taskId } = await create({ model: "Seedance" });
    const final = await client.waitForFinal(taskId, 15_000, 20);
    expect(final.body.data?.status).toBe("success");
    expect(arkA.createsFor(`reelay-task-${taskId}`)).toHaveLength(1);
  });

  it("two channels with maxInFlight 1: five tasks never have more than two at Ark at once, and both channels work", async () => {
    pair.generation = { kind: "succeed", afterPolls: 3 };
    const tasks = await Promise.all([1, 2, 3, 4, 5].map(() => create({ model: "Seedance-pair" })));
    const finals = await Promise.all(tasks.map((task) => client.waitForFinal(task.taskId, 20_000, 20)));
    expect(finals.map((final) => final.body.data?.status)).toEqual(Array(5).fill("success"));
    expect(pair.inFlightPeak).toBe(2);
    const channels = await Promise.all(tasks.map(async (task) => (await events(app, task.taskId)).find((e) => e.type === "UpstreamAccepted")));
    expect(new Set(channels.map((event) => (event?.type === "UpstreamAccepted" ? event.data.channel : undefined)))).toEqual(new Set(["pair-1", "pair-2"]));
  });

  it("waiting work is served fairly: one account's burst does not starve another's task", async () => {
    const burst = new VideoClient(app.baseUrl, await app.keyFor("burst", 1000));
    const other = new VideoClient(app.baseUrl, await app.keyFor("patient", 1000));
    const waiting = async () => (await fleetChannelReports(app.nats)).find((row) => row.channel === "pair-1")?.waiting ?? 0;
    const createsBefore = pair.creates.length;
    // Two burst tasks hold both slots (and do not finish yet); six more wait, then the other account's one.
    pair.generation = { kind: "never" };
    const burstTasks = Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map(() => create({ model: "Seedance-pair" }, burst)));
    await expect.poll(waiting, { timeout: 10_000 }).toBe(6);
    const single = create({ model: "Seedance-pair" }, other);
    await expect.poll(waiting, { timeout: 10_000 }).toBe(7);
    pair.generation = { kind: "succeed", afterPolls: 2 };
    for (const task of pair.tasks.values()) task.generation = pair.generation;
    const { taskId } = await single;
    await other.waitForFinal(taskId, 20_000, 20);
    await Promise.all((await burstTasks).map((task) => burst.waitForFinal(task.taskId, 20_000, 20)));
    const order = pair.creates.slice(createsBefore).map((c) => c.safety_identifier);
    // The burst holds a slot and the other account none: the other account's task takes the first slot that frees.
    expect(order.indexOf(`reelay-task-${taskId}`)).toBe(2);
  });

  it("a channel whose key Ark refuses leaves the rotation with its error in reelay channels; the task runs on the next channel", async () => {
    const { taskId } = await create({ model: "Seedance-failover" });
    const final = await client.waitForFinal(taskId, 15_000, 20);
    expect(final.body.data?.status).toBe("success");
    const accepted = (await events(app, taskId)).find((e) => e.type === "UpstreamAccepted");
    expect(accepted?.type === "UpstreamAccepted" ? accepted.data.channel : undefined).toBe("ark-b");
    // The channel's record is written beside the task's run, not before it goes on: read it once it is there.
    await expect.poll(async () => (await fleetChannelReports(app.nats)).find((channel) => channel.channel === "ark-wrong-key")?.state, { timeout: 10_000 }).toBe("cooling down");
    const report = { channels: await fleetChannelReports(app.nats) };
    const wrong = report.channels.find((channel) => channel.channel === "ark-wrong-key");
    expect(wrong).toMatchObject({ kind: "ark", state: "cooling down", inFlight: 0 });
    expect(wrong?.recentErrors.at(-1)?.message).toMatch(/AuthenticationError/);
    expect(report.channels.find((channel) => channel.channel === "ark-b")?.state).toBe("in rotation");
  });

  it("a model whose channels have no key set is refused at create: 403 model not available", async () => {
    const { status, body } = await create({ model: "Seedance-no-key" });
    expect(status).toBe(403);
    expect(body.msg).toBe("model not available: Seedance-no-key");
  });

  it("Ark's callback makes the runner ask at once (the task polls only every minute); the callback itself is never trusted", async () => {
    callbacks.generation = { kind: "succeed", afterMs: 300 };
    const { taskId } = await create({ model: "Seedance-callback" });
    const final = await client.waitForFinal(taskId, 10_000, 20);
    expect(final.body.data?.status).toBe("success");
    expect(callbacks.creates[0]?.callback_url).toBe(`http://127.0.0.1:${(forwarder.address() as AddressInfo).port}/hooks/upstream/ark-cb`);
    // A forged callback for a task that is not done only costs a status call.
    callbacks.generation = { kind: "never" };
    const pending = await create({ model: "Seedance-callback" });
    await expect.poll(() => callbacks.taskFor(`reelay-task-${pending.taskId}`)).toBeDefined();
    const providerTaskId = callbacks.taskFor(`reelay-task-${pending.taskId}`)?.id ?? "none";
    // The runner must have recorded Ark's answer first: a callback for a task it does not know yet is dropped.
    await expect.poll(async () => (await client.query(pending.taskId)).body.data?.provider_task_id).toBe(providerTaskId);
    const forged = await fetch(`${app.baseUrl}/hooks/upstream/ark-cb`, { method: "POST", body: JSON.stringify({ id: providerTaskId, status: "succeeded", content: { video_url: "https://evil.example/x.mp4" } }) });
    expect(forged.status).toBe(200);
    await expect.poll(() => callbacks.statusCalls.get(providerTaskId) ?? 0).toBe(1);
    expect((await client.query(pending.taskId)).body.data?.status).not.toBe("success");
    expect((await fetch(`${app.baseUrl}/hooks/upstream/ark-a`, { method: "POST", body: "{}" })).status).toBe(404);
    expect((await fetch(`${app.baseUrl}/hooks/upstream/ark-cb`, { method: "POST", body: "not json" })).status).toBe(400);
  });

  it("an upstream down longer than maxTaskMs fails the task with a timeout and releases the money", async () => {
    const slowClient = new VideoClient(slow.baseUrl, await slow.keyFor("down", 100));
    const before = await availableOnceSettled(slow.ledger, "down");
    slowArk.down = true;
    const { taskId } = await create({ model: "Seedance" }, slowClient);
    const final = await slowClient.waitForFinal(taskId, 15_000, 50);
    slowArk.down = false;
    expect(final.body).toEqual({ code: 500, msg: "timed out: not finished within 2 seconds" });
    await expect.poll(() => available(slow, "down"), { timeout: 5_000 }).toBe(before);
  });

  it("a task Ark never finishes fails at the deadline, free, and is cancelled at Ark while still queued", async () => {
    const slowClient = new VideoClient(slow.baseUrl, await slow.keyFor("never", 100));
    const before = await availableOnceSettled(slow.ledger, "never");
    slowArk.generation = { kind: "never" };
    const { taskId } = await create({ model: "Seedance" }, slowClient);
    const final = await slowClient.waitForFinal(taskId, 15_000, 50);
    slowArk.generation = { kind: "succeed", afterPolls: 1 };
    expect(final.body.msg).toMatch(/timed out/);
    // The Ark task reelay recorded for it (its UpstreamAccepted), the one create made with its reference.
    const accepted = (await events(slow, taskId)).find((e) => e.type === "UpstreamAccepted");
    const providerTaskId = accepted?.type === "UpstreamAccepted" ? accepted.data.providerTaskId : "none";
    expect(slowArk.createsFor(`reelay-task-${taskId}`)).toHaveLength(1);
    await expect.poll(() => slowArk.tasks.get(providerTaskId)?.status, { timeout: 5_000 }).toBe("cancelled");
    await expect.poll(() => available(slow, "never"), { timeout: 5_000 }).toBe(before);
    // Cancelled once: a second DELETE would have removed Ark's record of the cancelled task.
    expect(slowArk.deletes.filter((id) => id === providerTaskId)).toEqual([providerTaskId]);
    expect(slowArk.tasks.get(providerTaskId)?.status).toBe("cancelled");
  });

  it("an expired result address is asked for again; still expired, the task fails free", async () => {
    const slowClient = new VideoClient(slow.baseUrl, await slow.keyFor("expired-url", 100));
    const before = await availableOnceSettled(slow.ledger, "expired-url");
    slowArk.resultLifetimeMs = -1;
    slowArk.generation = { kind: "succeed", afterPolls: 1 };
    const { taskId } = await create({ model: "Seedance" }, slowClient);
    const final = await slowClient.waitForFinal(taskId, 15_000, 50);
    slowArk.resultLifetimeMs = 24 * 60 * 60_000;
    expect(final.body.msg).toMatch(/no longer available \(HTTP 403\)/);
    expect(slowArk.statusCalls.get(slowArk.taskFor(`reelay-task-${taskId}`)?.id ?? "none")).toBeGreaterThanOrEqual(2);
    await expect.poll(() => available(slow, "expired-url"), { timeout: 5_000 }).toBe(before);
  });

  it("reelay channels lists each channel's state and errors; reelay audit upstream sets charges against upstream usage per model and channel", async () => {
    const channels = await reelayInProcess(app, "channels");
    expect(channels.stdout).toMatch(/ark-wrong-key\s+ark\s+cooling down\s+0\/10 .*AuthenticationError/);
    expect(channels.stdout).toMatch(/pair-1\s+ark\s+in rotation\s+0\/1 /);
    const audit = await reelayInProcess(app, "audit", "upstream", "--json");
    const rows = JSON.parse(audit.stdout) as Array<{ model: string; channel: string; succeeded: number; failed: number; upstreamTokens: number; billedTokens: number; mismatched: number[]; chargedFailures: number[] }>;
    const seedance = rows.find((row) => row.model === "Seedance" && row.channel === "ark-a");
    expect(seedance?.succeeded).toBeGreaterThanOrEqual(5);
    expect(seedance?.failed).toBeGreaterThanOrEqual(3);
    expect(seedance?.billedTokens).toBe(seedance?.upstreamTokens);
    expect(rows.find((row) => row.model === "Seedance-failover")?.channel).toBe("ark-b");
    expect(rows.flatMap((row) => [...row.mismatched, ...row.chargedFailures])).toEqual([]);
  });
});
