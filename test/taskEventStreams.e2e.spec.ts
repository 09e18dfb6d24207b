import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

interface Received {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/** Live task events over SSE, read with a standard EventSource client and with raw fetch. */
describe("task event streams", () => {
  let app: TestApp;
  const vendor = new ScriptedVendor({ pollEveryMs: 30, pollMaxEveryMs: 30 });
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor, tweak: (config) => (config.limits.sseKeepaliveMs = 200) });
    for (const account of ["east", "west"]) keys[account] = await app.keyFor(account, 100);
  });
  afterAll(async () => app?.stop());

  const client = (account: string) => new VideoClient(app.baseUrl, keys[account] as string);
  const create = async (account: string) => (await client(account).create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 })).body.data?.task_id as number;

  /** Opens a standard EventSource with the key, collects `status` events until `until` says so. */
  const follow = (path: string, account: string, until: (events: Received[]) => boolean) =>
    new Promise<{ events: Received[]; source: EventSource }>((resolve, reject) => {
      const events: Received[] = [];
      const source = new EventSource(`${app.baseUrl}${path}`, {
        fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${keys[account]}` } }),
      });
      const timer = setTimeout(() => reject(new Error(`no end after 15 s: ${JSON.stringify(events)}`)), 15_000);
      source.addEventListener("status", (message) => {
        events.push({ id: message.lastEventId, type: message.type, data: JSON.parse(message.data) as Record<string, unknown> });
        if (until(events)) {
          clearTimeout(timer);
          resolve({ events, source });
        }
      });
    });

  /** Reads a stream with fetch (so headers like Last-Event-ID are ours to set) until it ends. */
  const readRaw = async (path: string, account: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${app.baseUrl}${path}`, { headers: { authorization: `Bearer ${keys[account]}`, ...headers } });
    return { status: response.status, type: response.headers.get("content-type"), text: await response.text() };
  };
  const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

  it("streams one task: its current state first, then each status change, and a reconnect after the end is told to stop", async () => {
    vendor.generation = { kind: "succeed", after: 4 };
    const taskId = await create("east");
    const { events, source } = await follow(`/api/compat/videosTask/events?id=${taskId}`, "east", (e) => e.at(-1)?.data.status === "success");
    // The current state comes first: pending, or running if the task got there before the stream opened.
    const statuses = events.map((e) => e.data.status);
    expect(statuses.length).toBeGreaterThanOrEqual(2);
    expect(statuses).toEqual(["pending", "running", "success"].slice(-statuses.length));
    // The query reads the projected view, which may trail the log by a moment: wait for it to be final too.
    const queried = await client("east").waitForFinal(taskId, 10_000, 20);
    expect(events.at(-1)?.data).toEqual(queried.body.data);
    const sequence = events.map((e) => Number(e.id));
    expect([...sequence].sort((a, b) => a - b)).toEqual(sequence);
    // The server ended the stream; EventSource reconnects with Last-Event-ID and gets 204: closed for good.
    await expect.poll(() => source.readyState, { timeout: 5000 }).toBe(EventSource.CLOSED);
  });

  it("resumes after Last-Event-ID without gaps or repeats, and keeps idle connections alive", async () => {
    vendor.generation = { kind: "succeed", after: 2 };
    const taskId = await create("east");
    await client("east").waitForFinal(taskId, 10_000, 20);
    const whole = await readRaw(`/api/compat/videosTask/events?id=${taskId}`, "east");
    expect(whole.type).toBe("text/event-stream");
    expect(ids(whole.text)).toHaveLength(1); // a final task: its current state, then the end

    const all = await readRaw(`/api/compat/videosTask/events?id=${taskId}`, "east", { "last-event-id": "1" });
    const [first, ...rest] = ids(all.text);
    const resumed = await readRaw(`/api/compat/videosTask/events?id=${taskId}`, "east", { "last-event-id": String(first) });
    expect(ids(resumed.text)).toEqual(rest);

    vendor.generation = { kind: "never" };
    const idle = await create("east");
    const controller = new AbortController();
    const response = await fetch(`${app.baseUrl}/api/compat/videosTask/events?id=${idle}`, { headers: { authorization: `Bearer ${keys.east}` }, signal: controller.signal });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    while (!text.includes(": keepalive")) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    expect(text).toMatch(/event: status\ndata: \{"task_id":\d+,"status":"(pending|running)"/);
  });

  it("answers another account's task like a missing one, and a bad id or Last-Event-ID with 400", async () => {
    vendor.generation = { kind: "succeed", after: 1 };
    const taskId = await create("east");
    const foreign = await readRaw(`/api/compat/videosTask/events?id=${taskId}`, "west");
    expect(foreign.status).toBe(404);
    expect(JSON.parse(foreign.text)).toEqual({ code: 404, msg: `task ${taskId} does not exist` });
    expect((await readRaw("/api/compat/videosTask/events?id=abc", "east")).status).toBe(400);
    expect((await readRaw(`/api/compat/videosTask/events?id=${taskId}`, "east", { "last-event-id": "x1" })).status).toBe(400);
    const noKey = await fetch(`${app.baseUrl}/api/compat/videosTask/events?id=${taskId}`);
    expect(noKey.status).toBe(401);
  });

  it("streams every task of the caller's account and none of another's; resumes from an id", async () => {
    vendor.generation = { kind: "succeed", after: 1 };
    const following = follow("/api/compat/videosTasks/events", "west", (e) => e.filter((x) => x.data.status === "success").length === 2);
    await new Promise((resolve) => setTimeout(resolve, 200)); // the stream is open before the tasks exist
    const mine = [await create("west"), await create("west")];
    await create("east");
    const { events, source } = await following;
    source.close();
    expect(new Set(events.map((e) => e.data.task_id))).toEqual(new Set(mine));
    expect(events.filter((e) => e.data.status === "pending")).toHaveLength(2);

    // Resuming from the first event: everything after it, once (a stream of an account never ends by itself).
    const resumedEvents: Received[] = [];
    const controller = new AbortController();
    const response = await fetch(`${app.baseUrl}/api/compat/videosTasks/events`, { headers: { authorization: `Bearer ${keys.west}`, "last-event-id": events[0]?.id ?? "" }, signal: controller.signal });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    while (ids(text).length < events.length - 1) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    resumedEvents.push(...ids(text).map((id) => ({ id: String(id), type: "status", data: {} })));
    expect(resumedEvents.map((e) => e.id)).toEqual(events.slice(1).map((e) => e.id));
  });
});
