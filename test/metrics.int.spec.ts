import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectProcessMetrics } from "../services/shared/metrics/processMetrics.ts";
import { registerConsumerLagMetrics } from "../services/shared/metrics/consumerLag.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { parseSamples, sampleSum } from "./helpers/promText.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/** Metrics after real traffic through the edge, the runner (scripted vendor) and the ledger, in one process. */
describe("metrics", () => {
  let app: TestApp;
  let client: VideoClient;
  const vendor = new ScriptedVendor();

  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor });
    registerConsumerLagMetrics(app.nats.jsm);
    client = new VideoClient(app.baseUrl, await app.keyFor("metrics", 100));
  });
  afterAll(async () => {
    await app?.stop();
  });

  const scrape = async () => parseSamples((await collectProcessMetrics()).text);
  const create = async () => (await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 })).body.data?.task_id as number;

  it("a created task moves the task, upstream and ledger counters; a failing upstream call shows up by outcome", async () => {
    const before = await scrape();
    vendor.scriptSubmits("5xx");
    const taskId = await create();
    expect((await client.waitForFinal(taskId, 10_000, 20)).body.data?.status).toBe("success");
    // The runner counts a finished task after its settlement is queued, and the settler charges it a
    // moment later: wait for both counters, not a sleep.
    const progressed = (samples: Awaited<ReturnType<typeof scrape>>) =>
      sampleSum(samples, "reelay_video_tasks_finished_total", { provider: "local", outcome: "success" }) >
        sampleSum(before, "reelay_video_tasks_finished_total", { provider: "local", outcome: "success" }) &&
      sampleSum(samples, "reelay_ledger_movements_yuan_total", { kind: "settled" }) > sampleSum(before, "reelay_ledger_movements_yuan_total", { kind: "settled" });
    let after = await scrape();
    for (let i = 0; i < 200 && !progressed(after); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      after = await scrape();
    }
    const delta = (name: string, labels: Record<string, string> = {}) => sampleSum(after, name, labels) - sampleSum(before, name, labels);

    expect(delta("reelay_video_tasks_created_total", { model: "VideoModel-2.0-mini" })).toBe(1);
    expect(delta("reelay_video_tasks_finished_total", { provider: "local", outcome: "success" })).toBe(1);
    expect(delta("reelay_upstream_calls_total", { provider: "local", operation: "submit", outcome: "unavailable" })).toBe(1);
    expect(delta("reelay_upstream_calls_total", { provider: "local", operation: "submit", outcome: "ok" })).toBe(1);
    expect(delta("reelay_upstream_calls_total", { provider: "local", operation: "status", outcome: "ok" })).toBeGreaterThanOrEqual(1);
    expect(delta("reelay_upstream_call_duration_seconds_count", { provider: "local", operation: "submit" })).toBe(2);
    expect(delta("reelay_ledger_movements_yuan_total", { kind: "reserved" })).toBeGreaterThan(0);
    expect(delta("reelay_ledger_movements_yuan_total", { kind: "settled" })).toBeGreaterThan(0);
    expect(sampleSum(after, "reelay_nats_connected")).toBe(1);
    expect(delta("reelay_http_requests_total", { route: "/api/compat/videosGenerations", code: "200" })).toBe(1);
    expect(delta("reelay_http_request_duration_seconds_count", { route: "/api/compat/videosTask" })).toBeGreaterThanOrEqual(1);
  });

  it("times a streamed chat's first chunk per model, and counts unmatched paths under a bounded label", async () => {
    const before = await scrape();
    const response = await fetch(`${app.baseUrl}/api/compat/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${await app.keyFor("metrics-chat", 1)}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "echo", stream: true, messages: [{ role: "user", content: "hi" }] }),
    });
    await response.text();
    await fetch(`${app.baseUrl}/no/such/path/${Math.random()}`);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) => sampleSum(after, name, labels) - sampleSum(before, name, labels);
    expect(delta("reelay_chat_time_to_first_chunk_seconds_count", { model: "echo" })).toBe(1);
    expect(delta("reelay_http_requests_total", { route: "unmatched", code: "404" })).toBe(1);
  });

  it("live tasks are gauged by provider and state, and consumer lag is read from the server", async () => {
    vendor.generation = { kind: "never" };
    const taskId = await create();
    let samples = await scrape();
    const settled = () =>
      sampleSum(samples, "reelay_video_tasks_in_flight", { provider: "local" }) === 1 &&
      sampleSum(samples, "reelay_consumer_ack_pending_messages", { consumer: "EVENTS/runners" }) === 1;
    for (let i = 0; i < 100 && !settled(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      samples = await scrape();
    }
    expect(sampleSum(samples, "reelay_video_tasks_in_flight", { provider: "local" })).toBe(1);
    expect(sampleSum(samples, "reelay_video_tasks_past_deadline")).toBe(0);
    // The runner holds the live task's job unacked: the runners' consumer owes one message (its first event).
    expect(sampleSum(samples, "reelay_consumer_ack_pending_messages", { consumer: "EVENTS/runners" })).toBe(1);
    // Its age: a job delivered within the same millisecond reads as 0, so only its presence is certain.
    const age = samples.find((s) => s.name === "reelay_consumer_oldest_unacked_age_seconds" && s.labels.consumer === "EVENTS/runners");
    expect(age?.value).toBeGreaterThanOrEqual(0);
    const consumers = new Set(samples.filter((s) => s.name === "reelay_consumer_pending_messages").map((s) => s.labels.consumer));
    expect([...consumers].sort()).toEqual(["EVENTS/runners", "EVENTS/task_log_reactors", "WEBHOOK_JOBS/webhooks"]);
    expect(taskId).toBeGreaterThan(0);
  });
});
