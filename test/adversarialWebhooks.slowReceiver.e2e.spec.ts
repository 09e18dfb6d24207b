import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { callbackEndpoint, type CallbackEndpoint } from "./helpers/callbackEndpoint.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/**
 * The account's share of the dispatcher (10 shipped): small, so the flood's queue forms however slowly a loaded
 * machine queues its jobs (with 10 slots a second it sometimes never did: they were delivered as they came).
 */
const PER_ACCOUNT = 4;
/** Each of the flood's deliveries takes this long: its account's 4 slots deliver 4 a second. */
const SLOW_MS = 1_000;
/** Two jobs each (pending, success): 200 jobs, about 50 s of the slow receiver's pace. */
const FLOOD_TASKS = 100;
const MEASURED_MS = 4_000;

/**
 * Jobs over their account's share wait on the server. They used to come back every 2–2.5 s to be sent back again
 * (2026-11-27: 256 waiting jobs made the consumer hand out 143 jobs a second for 11.7 deliveries), and pending jobs
 * were bounded by the consumer (20,000): one account's waiting jobs could hold every account's webhooks up.
 */
describe("adversarial webhooks: one account's slow receiver", () => {
  let app: TestApp;
  let slow: CallbackEndpoint;
  let quick: CallbackEndpoint;

  beforeAll(async () => {
    [slow, quick] = await Promise.all([callbackEndpoint({ delayMs: SLOW_MS }), callbackEndpoint()]);
    app = await startTestApp({
      providers: () => new ScriptedVendor(),
      tweak: (config) => {
        config.webhooks.allowHttp = true;
        config.webhooks.allowPrivateAddresses = true;
        config.webhooks.maxInFlightPerAccount = PER_ACCOUNT;
      },
    });
  });
  afterAll(async () => {
    await app?.stop();
    await Promise.all([slow?.stop(), quick?.stop()]);
  });

  it("brings the account's waiting jobs back about when a slot is free for them, and another account's webhook goes at once", async () => {
    const flooder = new VideoClient(app.baseUrl, await app.keyFor("slow-flooder"));
    const flood = await Promise.all(Array.from({ length: FLOOD_TASKS }, () => flooder.create({ model: "VideoModel-2.0-mini", prompt: "flood", duration: 4, callback_url: slow.url })));
    expect(flood.filter(({ status }) => status !== 200)).toEqual([]);
    const jobsLeft = async () => (await app.nats.jsm.streams.info(STREAMS.webhookJobs.name)).state.messages;
    const consumer = () => app.nats.jsm.consumers.info(STREAMS.webhookJobs.name, CONSUMERS.webhooks);
    // Measured from when most of the flood's jobs are queued, each was handed out once, the receiver's pace was
    // timed, and the jobs first sent back on a guessed pace (200 ms a delivery: 25 ms turns here, 5 s for 200 jobs)
    // have come back: the flood's waiting, not its arrival.
    await expect.poll(jobsLeft, { timeout: 30_000 }).toBeGreaterThanOrEqual(1.5 * FLOOD_TASKS);
    await expect.poll(async () => (await consumer()).num_pending, { timeout: 30_000 }).toBe(0);
    await expect.poll(() => slow.arrivals.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(5 * PER_ACCOUNT);

    const handedOut = async () => (await consumer()).delivered.consumer_seq;
    const [handedOutBefore, deliveredBefore] = [await handedOut(), slow.arrivals.length];
    const neighbour = new VideoClient(app.baseUrl, await app.keyFor("neighbour"));
    const createdAt = Date.now();
    expect((await neighbour.create({ model: "VideoModel-2.0-mini", prompt: "mine", duration: 4, callback_url: quick.url })).status).toBe(200);
    await sleep(MEASURED_MS);
    const [handedOutInWindow, deliveredInWindow] = [(await handedOut()) - handedOutBefore, slow.arrivals.length - deliveredBefore];

    expect(await jobsLeft(), "the flood is still waiting at the end of the window").toBeGreaterThan(PER_ACCOUNT);
    // The neighbour's first webhook came behind no one's queue (its task's events wait only for the reactors to
    // read the flood's: 29–621 ms alone). The bound is for a loaded machine (5.5 s once, with two suites at once),
    // and still a third of the flood's queue (50 s), which a webhook that waited behind it would wait out.
    await expect.poll(() => quick.arrivals.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
    expect((quick.arrivals[0] ?? Infinity) - createdAt).toBeLessThan(15_000);
    // The slow receiver got its share's pace; its waiting jobs came back about once each, not every 2 s.
    expect(deliveredInWindow, "the slow receiver's deliveries in the window").toBeGreaterThanOrEqual(((MEASURED_MS / SLOW_MS) * PER_ACCOUNT) / 2);
    // Measured 2026-11-28: 4.5–5.0 handed out per delivery (its jobs come back twice as often as its slots free up,
    // and each task's later job once more, after its earlier one); with a flat 2 s wait, 25.8 (more with more waiting).
    // A loaded run (CI's Node 24 suite, session 36) handed out 7.0 (not looked into further). The bound
    // is there to tell the turns from the flat wait, which it still does by more than twice.
    expect(handedOutInWindow / deliveredInWindow, `${handedOutInWindow} jobs handed out for ${deliveredInWindow} deliveries`).toBeLessThan(11);
    // However many jobs wait, none is held back for want of room on the server: the consumer has no such bound.
    expect((await consumer()).config.max_ack_pending).toBe(-1);
  });
});
