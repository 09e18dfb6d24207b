import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readTask } from "./helpers/taskReads.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { availableOnceSettled } from "./helpers/settledMoney.ts";

/**
 * The provider contract: what every adapter must do under the runner, checked through the public API
 * as a customer sees it and on the ledger. Here against the scripted vendor (test/fakes); each vendor
 * adapter runs the same cases against the fake of its own protocol.
 */
describe("provider contract (scripted vendor)", () => {
  let app: TestApp;
  let slow: TestApp;
  const vendor = new ScriptedVendor();
  const slowVendor = new ScriptedVendor({ maxInFlight: 1 });
  let client: VideoClient;

  beforeAll(async () => {
    [app, slow] = await Promise.all([
      startTestApp({ providers: () => vendor, tweak: (config) => (config.limits.maxTaskMs = 10_000) }),
      startTestApp({
        providers: () => slowVendor,
        tweak: (config) => {
          config.limits.maxTaskMs = 1_500;
          config.limits.submitWaitMs = 500;
        },
      }),
    ]);
    client = new VideoClient(app.baseUrl, await app.keyFor("contract", 100));
  });
  afterAll(async () => {
    await Promise.all([app?.stop(), slow?.stop()]);
  });

  const create = async (c: VideoClient = client) => {
    const created = await c.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 });
    return { ...created, taskId: created.body.data?.task_id as number };
  };
  const available = async (a: TestApp, account: string) => {
    const state = await a.ledger.current(account);
    return state.balanceMicros - state.reservedMicros;
  };
  const eventTypes = async (a: TestApp, taskId: number) => {
    const types: string[] = [];
    for (const event of (await readTask(a.nats, taskId)).events) types.push(event.type);
    return types;
  };

  it("submit, queued → running → succeeded: the customer gets the video, billed with the upstream's usage", async () => {
    vendor.generation = { kind: "succeed", after: 3, usageTokens: 50_000 };
    const { status, body, taskId } = await create();
    expect(status).toBe(200);
    expect(body.data?.provider_task_id).toMatch(/^scripted-/);
    const final = await client.waitForFinal(taskId, 10_000, 20);
    expect(final.body.data).toMatchObject({ status: "success", total_tokens: 50_000 });
    expect(await eventTypes(app, taskId)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationStarted", "GenerationSucceeded"]);
    vendor.generation = { kind: "succeed", after: 1 };
  });

  it("without reported usage, the estimate is billed", async () => {
    const { taskId } = await create();
    const final = await client.waitForFinal(taskId, 10_000, 20);
    // VideoModel-2.0-mini, 4 s at 1280x720: 1280·720·97/1024.
    expect(final.body.data).toMatchObject({ status: "success", total_tokens: 87_300 });
  });

  it("a failed generation fails the task with the vendor's reason and costs nothing", async () => {
    const before = await availableOnceSettled(app.ledger, "contract");
    vendor.generation = { kind: "fail", after: 2, reason: "the video could not be generated" };
    const { taskId } = await create();
    const final = await client.waitForFinal(taskId, 10_000, 20);
    vendor.generation = { kind: "succeed", after: 1 };
    expect(final.body).toEqual({ code: 500, msg: "the video could not be generated" });
    await expect.poll(() => available(app, "contract"), { timeout: 5_000 }).toBe(before);
  });

  it("a rejection at submit answers create with 400 and the reason, and costs nothing", async () => {
    const before = await availableOnceSettled(app.ledger, "contract");
    vendor.scriptSubmits("reject");
    const { status, body } = await create();
    expect(status).toBe(400);
    expect(body.msg).toMatch(/refused by the upstream's content policy/);
    await expect.poll(() => available(app, "contract"), { timeout: 5_000 }).toBe(before);
  });

  it("a 429 storm and 5xx answers delay the task but it succeeds, submitted once", async () => {
    const submitsBefore = vendor.submits.length;
    vendor.scriptSubmits("429", "5xx", "429");
    vendor.failStatusCalls(3);
    const { taskId } = await create();
    const final = await client.waitForFinal(taskId, 10_000, 20);
    expect(final.body.data?.status).toBe("success");
    expect(vendor.submits.length - submitsBefore).toBe(1);
  });

  it("an answer lost after the upstream created the task never makes a second upstream task", async () => {
    const submitsBefore = vendor.submits.length;
    vendor.scriptSubmits("acceptThenLoseAnswer");
    const { taskId } = await create();
    const final = await client.waitForFinal(taskId, 10_000, 20);
    expect(final.body.data?.status).toBe("success");
    expect(vendor.submits.length - submitsBefore).toBe(1);
  });

  it("a result copy that breaks is retried as its own step", async () => {
    vendor.breakResults(2);
    const { taskId } = await create();
    const final = await client.waitForFinal(taskId, 10_000, 20);
    expect(final.body.data?.status).toBe("success");
    const video = await fetch(String(final.body.data?.video_url));
    expect(video.status).toBe(200);
    expect(Buffer.from(await video.arrayBuffer()).subarray(4, 8).toString()).toBe("ftyp");
  });

  it("an upstream that never finishes: past the deadline the task fails, the upstream task is cancelled, the money is released", async () => {
    const slowClient = new VideoClient(slow.baseUrl, await slow.keyFor("slow", 100));
    const before = await availableOnceSettled(slow.ledger, "slow");
    slowVendor.generation = { kind: "never" };
    const { taskId } = await create(slowClient);
    const final = await slowClient.waitForFinal(taskId, 10_000, 50);
    expect(final.body).toEqual({ code: 500, msg: "timed out: not finished within 1.5 seconds" });
    expect(slowVendor.inFlight).toBe(0);
    await expect.poll(() => available(slow, "slow"), { timeout: 5_000 }).toBe(before);
  });

  it("a submit that hangs ends at the deadline like any other call", async () => {
    slowVendor.scriptSubmits("hang");
    slowVendor.generation = { kind: "succeed", after: 1 };
    const slowClient = new VideoClient(slow.baseUrl, await slow.keyFor("slow-hang", 100));
    const { taskId } = await create(slowClient);
    const final = await slowClient.waitForFinal(taskId, 10_000, 50);
    expect(final.body.msg).toMatch(/timed out/);
    // The upstream had registered the task before its answer hung: it is found and cancelled, after the final event.
    await expect.poll(() => slowVendor.inFlight, { timeout: 10_000 }).toBe(0);
  });

  it("a submit cut short by the deadline that the upstream registers late is still found and cancelled", async () => {
    // A vendor and gateway of its own: nothing else holds a slot or a scripted submit there.
    const lateVendor = new ScriptedVendor();
    const late = await startTestApp({ providers: () => lateVendor, tweak: (config) => (config.limits.maxTaskMs = 1_500) });
    try {
      lateVendor.scriptSubmits("hangThenLandLate");
      lateVendor.generation = { kind: "never" };
      const lateClient = new VideoClient(late.baseUrl, await late.keyFor("late", 100));
      const { taskId } = await create(lateClient);
      const final = await lateClient.waitForFinal(taskId, 10_000, 50);
      expect(final.body.msg).toMatch(/timed out/);
      // The upstream registers the task 0.5 s after our side gave up: the look-up at the deadline misses it,
      // a later one (after 1 s, 5 s) finds and cancels it.
      const ofTask = (id: string) => id.startsWith(`scripted-${taskId}-`);
      await expect.poll(() => lateVendor.submits.some(ofTask), { timeout: 10_000 }).toBe(true);
      await expect.poll(() => lateVendor.cancelled.some(ofTask), { timeout: 15_000 }).toBe(true);
    } finally {
      await late.stop();
    }
  });

  it("with maxInFlight 1, tasks wait their turn (pending) and never overlap at the upstream", async () => {
    slowVendor.generation = { kind: "succeed", after: 2 };
    slowVendor.inFlightPeak = 0;
    const slowClient = new VideoClient(slow.baseUrl, await slow.keyFor("slow-queue", 100));
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await create(slowClient)).taskId);
    const finals = await Promise.all(ids.map((id) => slowClient.waitForFinal(id, 10_000, 20)));
    expect(finals.map((f) => f.body.data?.status)).toEqual(["success", "success", "success"]);
    expect(slowVendor.inFlightPeak).toBe(1);
  });
});
