import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUNNER_SUBJECTS, type UpstreamNews } from "../contracts/runnerControl.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/**
 * A task waiting for its next poll is held by the runner as a timer, not a suspended call chain
 * (its snapshot and one timer, services/runner/liveTask.ts): what may end such a wait early must still reach it.
 */
describe("a task waiting for its next poll", () => {
  let app: TestApp;
  // The first poll is a minute away: only the upstream's news or the deadline ends the wait sooner.
  const vendor = new ScriptedVendor({ pollFirstAfterMs: 60_000 });
  let client: VideoClient;

  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor, tweak: (config) => (config.limits.maxTaskMs = 4_000) });
    client = new VideoClient(app.baseUrl, await app.keyFor("waits", 100));
  });
  afterAll(async () => {
    await app?.stop();
  });

  const create = async () => {
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 });
    expect(created.status).toBe(200);
    return { taskId: created.body.data?.task_id as number, providerTaskId: created.body.data?.provider_task_id as string };
  };

  it("asks the upstream at once when the upstream says there is news", async () => {
    vendor.generation = { kind: "succeed", after: 1 };
    const { taskId, providerTaskId } = await create();
    expect(vendor.statusCalls.get(providerTaskId)).toBeUndefined();
    const news: UpstreamNews = { channel: "local", providerTaskId };
    // As the edge's callback route does; the runner may still be storing the acceptance, so say it until heard.
    await expect
      .poll(
        async () => {
          app.nats.nc.publish(RUNNER_SUBJECTS.upstreamNews, JSON.stringify(news));
          return (await client.query(taskId)).body.data?.status;
        },
        { timeout: 3_000, interval: 200 },
      )
      .toBe("success");
    expect(vendor.statusCalls.get(providerTaskId)).toBe(1);
  });

  it("times out at its deadline, not at its next poll, and the upstream task is cancelled", async () => {
    vendor.generation = { kind: "never" };
    const { taskId, providerTaskId } = await create();
    const final = await client.waitForFinal(taskId, 8_000, 100);
    expect(final.body).toEqual({ code: 500, msg: "timed out: not finished within 4 seconds" });
    expect(vendor.statusCalls.get(providerTaskId)).toBeUndefined();
    expect(vendor.cancelled).toContain(providerTaskId);
  });
});
