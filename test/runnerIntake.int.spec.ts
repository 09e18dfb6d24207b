import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { fleetChannelReports } from "../services/shared/channelReports.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const MODEL = "VideoModel-2.0-mini";

/** The fleet's report of the channel the model runs on (every test provider here is the one scripted vendor). */
const channelReport = async (app: TestApp) => (await fleetChannelReports(app.nats)).find((row) => row.inFlight > 0 || row.waiting > 0);

/** The task id in one of the scripted vendor's upstream ids (`scripted-<taskId>-<uuid>`). */
const taskIdOf = (upstreamId: string): number => Number(upstreamId.split("-")[1]);

/**
 * A runner takes from the queue what it can start, plus at most `runner.maxWaitingTasks` tasks waiting for a
 * slot, shared among the accounts waiting (services/runner/intake.ts): once its waiting set is full it still
 * reads the queue, an account below its share takes the place of a waiting task of an account over it, and
 * every other opening goes straight back to the queue, where any runner can take it.
 */
describe("a runner's intake", () => {
  let app: TestApp;
  // One slot; tasks never finish: every task after the first waits.
  const vendor = new ScriptedVendor({ maxInFlight: 1 });
  let client: VideoClient;

  beforeAll(async () => {
    vendor.generation = { kind: "never" };
    app = await startTestApp({
      providers: () => vendor,
      tweak: (config) => {
        config.runner.maxWaitingTasks = 2;
        // Seven of the eight creates never hear the upstream's answer: each answers after this wait, not 10 s.
        config.limits.submitWaitMs = 200;
      },
    });
    client = new VideoClient(app.baseUrl, await app.keyFor("intake", 100));
  });
  afterAll(async () => {
    await app?.stop();
  });

  it("given one slot and maxWaitingTasks 2, when one account creates 8 tasks, then the runner holds 1 at the upstream and 2 waiting, and hands the other 5 back to the queue", async () => {
    await Promise.all(Array.from({ length: 8 }, async (_, i) => expect((await client.create({ model: MODEL, prompt: `task ${i}`, duration: 4 })).status).toBe(200)));
    await expect.poll(async () => (await channelReport(app))?.waitingByAccount, { timeout: 5_000 }).toEqual({ intake: 2 });
    // Still so a moment later, while the other five come back from the queue and go straight back to it.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await channelReport(app))?.waitingByAccount).toEqual({ intake: 2 });
    expect(vendor.submits).toHaveLength(1);
    // Every opening was read, and the five the runner did not hold came back to it at least once.
    const consumer = await app.nats.jsm.consumers.info(STREAMS.events.name, CONSUMERS.runners);
    expect(consumer.num_pending).toBe(0);
    expect(consumer.num_redelivered).toBeGreaterThan(0);
  });
});

describe("a runner's intake shares its waiting set among accounts", () => {
  let app: TestApp;
  // One slot; each task takes a few status calls.
  const vendor = new ScriptedVendor({ maxInFlight: 1, pollEveryMs: 20, pollMaxEveryMs: 20 });
  let big: VideoClient;
  let small: VideoClient;

  beforeAll(async () => {
    vendor.generation = { kind: "succeed", after: 2 };
    app = await startTestApp({
      providers: () => vendor,
      tweak: (config) => {
        config.runner.maxWaitingTasks = 4;
        config.limits.submitWaitMs = 200;
      },
    });
    big = new VideoClient(app.baseUrl, await app.keyFor("big", 1_000));
    small = new VideoClient(app.baseUrl, await app.keyFor("small", 100));
  });
  afterAll(async () => {
    await app?.stop();
  });

  it("given one slot and maxWaitingTasks 4, when account big creates 20 tasks and then account small creates 1, then small's task is at the upstream after at most 3 more of big's, nothing runs twice and every task succeeds", { timeout: 90_000 }, async () => {
    const burst = await Promise.all(Array.from({ length: 20 }, async (_, i) => (await big.create({ model: MODEL, prompt: `big ${i}`, duration: 4 })).body.data?.task_id as number));
    const submittedBefore = vendor.submits.length;
    const created = await small.create({ model: MODEL, prompt: "small", duration: 4 });
    expect(created.status).toBe(200);
    const smallTask = created.body.data?.task_id as number;

    const finals = await Promise.all([...burst.map((id) => big.waitForFinal(id)), small.waitForFinal(smallTask)]);
    for (const answer of finals) expect(answer.body.data?.status).toBe("success");
    // Nothing ran twice: one submit per task, whatever was handed back to the queue on the way.
    const submitted = vendor.submits.map(taskIdOf);
    expect(new Set(submitted).size).toBe(21);
    expect(submitted).toHaveLength(21);
    // When small's task came, the runner held big's tasks waiting up to its set of 4: small's share (4 / 2
    // accounts) let it take the place of big's newest, and the pool served it at the next free slot. Queue
    // order would have put it behind every one of big's tasks still waiting then.
    const bigBeforeSmall = submitted.indexOf(smallTask) - submittedBefore;
    console.log(JSON.stringify({ intake: { bigWaitingWhenSmallCame: 20 - submittedBefore, bigBeforeSmall } }));
    expect(20 - submittedBefore).toBeGreaterThan(10);
    expect(bigBeforeSmall).toBeLessThanOrEqual(3);
  });
});
