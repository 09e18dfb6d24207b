import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const STREAMS_PER_ACCOUNT = 3;

/** Issue 32: one tenant's event streams can neither take the edge's capacity nor make it read other tenants' history. */
describe("adversarial event streams", () => {
  let app: TestApp;
  const keys: Record<string, string> = {};
  beforeAll(async () => {
    app = await startTestApp({
      providers: () => new ScriptedVendor(),
      tweak: (config) => {
        config.limits.sseKeepaliveMs = 200;
        config.limits.eventStreamsPerAccount = STREAMS_PER_ACCOUNT;
      },
    });
    for (const account of ["hoarder", "neighbour", "resumer", "quiet"]) keys[account] = await app.keyFor(account, 100);
  });
  afterAll(async () => app?.stop());

  const open = (account: string, headers: Record<string, string> = {}) => {
    const abort = new AbortController();
    const answer = fetch(`${app.baseUrl}/api/compat/videosTasks/events`, { headers: { authorization: `Bearer ${keys[account]}`, ...headers }, signal: abort.signal });
    return { answer, close: () => abort.abort() };
  };

  /** What an account's stream resumed from `lastEventId` sends until a task's success, then closed. */
  const readUntilSuccess = async (account: string, lastEventId: string): Promise<string> => {
    const stream = open(account, { "last-event-id": lastEventId });
    const reader = (await stream.answer).body?.getReader();
    let text = "";
    while (reader && !/"status":"success"/.test(text)) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString("utf8");
    }
    stream.close();
    return text;
  };

  it("an account holding its share of event streams gets 429 for the next one; others still get theirs, and a closed one frees its place", async () => {
    const held = Array.from({ length: STREAMS_PER_ACCOUNT }, () => open("hoarder"));
    for (const stream of held) expect((await stream.answer).status).toBe(200);
    const refused = await fetch(`${app.baseUrl}/api/compat/videosTasks/events`, { headers: { authorization: `Bearer ${keys.hoarder}` } });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ code: 429, msg: expect.stringMatching(/^too many event streams open for this account \(at most 3 per edge\)/) });
    const neighbour = open("neighbour");
    expect((await neighbour.answer).status).toBe(200);
    neighbour.close();
    held[0]?.close();
    await expect.poll(async () => {
      const again = open("hoarder");
      const status = (await again.answer).status;
      again.close();
      return status;
    }).toBe(200);
    for (const stream of held) stream.close();
  });

  it("a resume with Last-Event-ID 1 reads the caller's own task events only, however much other tenants wrote", async () => {
    const resumer = new VideoClient(app.baseUrl, keys.resumer as string);
    const mine = (await resumer.create({ model: "VideoModel-2.0-mini", prompt: "mine", duration: 4 })).body.data?.task_id as number;
    await resumer.waitForFinal(mine);
    const other = new VideoClient(app.baseUrl, keys.neighbour as string);
    await Promise.all(Array.from({ length: 30 }, (_, i) => other.create({ model: "VideoModel-2.0-mini", prompt: `theirs ${i}`, duration: 4 })));
    const text = await readUntilSuccess("resumer", "1");
    const taskIds = [...text.matchAll(/"task_id":(\d+)/g)].map((m) => Number(m[1]));
    expect(taskIds.length).toBeGreaterThan(0);
    expect(new Set(taskIds)).toEqual(new Set([mine]));
  });

  it("a resume after the account's last event, while other tenants wrote on, keeps no consumer on the server once its client leaves (each waited for the account's next event, for good)", async () => {
    const quiet = new VideoClient(app.baseUrl, keys.quiet as string);
    const task = (await quiet.create({ model: "VideoModel-2.0-mini", prompt: "once", duration: 4 })).body.data?.task_id as number;
    await quiet.waitForFinal(task);
    // The sequence of the account's last event: its stream's last id, read from the start.
    const text = await readUntilSuccess("quiet", "1");
    const lastId = Math.max(...[...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])));
    // Other tenants write on, so the edge's feed is past the quiet account's last event.
    const other = new VideoClient(app.baseUrl, keys.neighbour as string);
    const theirs = await Promise.all(Array.from({ length: 5 }, (_, i) => other.create({ model: "VideoModel-2.0-mini", prompt: `on ${i}`, duration: 4 })));
    for (const created of theirs) await other.waitForFinal(created.body.data?.task_id as number);
    const consumers = async () => (await app.nats.jsm.streams.info(STREAMS.events.name)).state.consumer_count;
    const before = await consumers();
    const resumes = Array.from({ length: 3 }, () => open("quiet", { "last-event-id": String(lastId) }));
    for (const resume of resumes) expect((await resume.answer).status).toBe(200);
    // Each stream answers before its catch-up opens a consumer: time for them to be made (they stayed for good).
    await sleep(1000);
    for (const resume of resumes) resume.close();
    await expect.poll(consumers).toBe(before);
  });
});
