import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/** An edge's view is behind for at most this long after its feed's consumer is lost (issue 35, item 5). */
const NOTICED_WITHIN_MS = 2_000;

describe("an edge whose feed of the task log loses its consumer", () => {
  let app: TestApp;
  let key: string;
  beforeAll(async () => {
    app = await startTestApp();
    key = await app.keyFor("feed-health");
  });
  afterAll(async () => app?.stop());

  const health = async () => {
    const answer = await fetch(`${app.baseUrl}/healthz`);
    return { status: answer.status, body: (await answer.json()) as { status: string } };
  };
  /** The edge's ordered consumers (the only consumers on EVENTS without a durable name while no event stream is open). */
  const edgeFeeds = async () => {
    const names: string[] = [];
    for await (const info of app.nats.jsm.consumers.list(STREAMS.events.name)) if (!info.config.durable_name) names.push(info.name);
    return names;
  };
  const query = async (taskId: number) => {
    const answer = await fetch(`${app.baseUrl}/api/compat/videosTask?id=${taskId}`, { headers: { authorization: `Bearer ${key}` } });
    return ((await answer.json()) as { data: { status: string } }).data.status;
  };

  // The 503 itself lasts only as long as opening the new consumer takes here (a deleted consumer is reported at
  // once): FeedLiveness's specs and the cluster test (a node killed) show it; this shows the edge recovers.
  it("opens a new consumer within 2 s, says 200 again, and answers a task that ended meanwhile as ended", async () => {
    expect((await health()).status).toBe(200);
    const created = await fetch(`${app.baseUrl}/api/compat/videosGenerations`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "while the feed is lost", duration: 4 }),
    });
    const { task_id: taskId } = ((await created.json()) as { data: { task_id: number } }).data;
    expect(await query(taskId)).toMatch(/pending|running/);

    const [lost, ...others] = await edgeFeeds();
    expect(others).toEqual([]);
    if (!lost) throw new Error("the edge has no feed");
    await app.nats.jsm.consumers.delete(STREAMS.events.name, lost);
    const lostAt = performance.now();

    await expect.poll(async () => (await edgeFeeds()).filter((name) => name !== lost), { timeout: NOTICED_WITHIN_MS, interval: 20 }).toHaveLength(1);
    expect(performance.now() - lostAt).toBeLessThan(NOTICED_WITHIN_MS);
    expect(await edgeFeeds()).not.toContain(lost);
    await expect.poll(async () => (await health()).status, { timeout: NOTICED_WITHIN_MS, interval: 20 }).toBe(200);

    // Final within the render's time, whether the answer came from NATS (feed behind) or from memory (current).
    await expect.poll(() => query(taskId), { timeout: 20_000, interval: 50 }).toBe("success");
    expect(await query(taskId)).toBe("success");
  });
});
