import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/**
 * A runner takes from the queue only what it can start, plus at most `runner.maxWaitingTasks` tasks waiting for
 * a slot: the rest stays in the task log's queue, where any runner (one started later, say) can take it.
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

  it("given one slot and maxWaitingTasks 2, when 8 tasks are created, then the runner holds 3 and the other 5 stay in the queue", async () => {
    for (let i = 0; i < 8; i++) expect((await client.create({ model: "VideoModel-2.0-mini", prompt: `task ${i}`, duration: 4 })).status).toBe(200);
    const consumer = async () => app.nats.jsm.consumers.info(STREAMS.events.name, CONSUMERS.runners);
    await expect.poll(async () => (await consumer()).num_ack_pending, { timeout: 5_000 }).toBe(3);
    // Still so a moment later: the runner does not fetch past its bound.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await consumer()).num_ack_pending).toBe(3);
    expect((await consumer()).num_pending).toBe(5);
    expect(vendor.submits).toHaveLength(1);
  });
});
