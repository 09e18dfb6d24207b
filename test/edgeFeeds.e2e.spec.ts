import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storeLimitsOf } from "../infra/jetstreamLayout.ts";
import { TaskEventHub } from "../services/edge/events/taskEventHub.ts";
import { startEdge } from "../services/edge/main.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { silentLog, startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

interface StatusEvent {
  id: string;
  data: { task_id: number; status: string };
}

/**
 * An edge's feed reads every task's later events, but openings only while an account's event stream is open
 * on it (TaskEventHub): a task made on one edge is still answered, streamed and listed on another.
 */
describe("two edges on one nats-server", () => {
  let app: TestApp;
  let edgeB: { port: number; stop(): Promise<void> };
  let natsB: Nats;
  let key: string;
  const vendor = new ScriptedVendor({ pollEveryMs: 30, pollMaxEveryMs: 30 });

  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor, tweak: (config) => (config.limits.sseKeepaliveMs = 200) });
    natsB = await connectNats(app.natsUrl, "edge-b", { replicas: 1, leaseMs: app.config.runner.leaseMs, ...storeLimitsOf(app.config) });
    edgeB = await startEdge(natsB, app.config, silentLog, { host: "127.0.0.1", port: 0, publicUrl: undefined });
    key = await app.keyFor("north", 100);
  });
  afterAll(async () => {
    await edgeB?.stop();
    await natsB?.nc.drain();
    await app?.stop();
  });

  const onA = () => new VideoClient(app.baseUrl, key);
  const onB = () => new VideoClient(`http://127.0.0.1:${edgeB.port}`, key);
  const create = async () => (await onA().create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 })).body.data?.task_id as number;

  /** Follows an SSE path on edge B until `until`; resolves once it is open, and gives its events when done. */
  const followOnB = (path: string, until: (events: StatusEvent[]) => boolean) => {
    const events: StatusEvent[] = [];
    const source = new EventSource(`http://127.0.0.1:${edgeB.port}${path}`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${key}` } }),
    });
    const opened = new Promise<void>((resolve) => source.addEventListener("open", () => resolve()));
    const done = new Promise<StatusEvent[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no end after 15 s: ${JSON.stringify(events)}`)), 15_000);
      source.addEventListener("status", (message) => {
        events.push({ id: message.lastEventId, data: JSON.parse(message.data) as StatusEvent["data"] });
        if (until(events)) {
          clearTimeout(timer);
          source.close();
          resolve(events);
        }
      });
    });
    return { opened, done };
  };

  it("given a task created on edge A, when edge B is asked for it at once, then it answers it, and its end", async () => {
    vendor.generation = { kind: "succeed", after: 3 };
    const taskId = await create();
    const queried = await onB().query(taskId);
    expect(queried.status).toBe(200);
    expect(["pending", "running", "success"]).toContain(queried.body.data?.status);
    expect((await onB().waitForFinal(taskId, 10_000, 20)).body.data?.status).toBe("success");
  });

  it("given an account stream open on edge B, when a task is created on edge A, then the stream shows it pending, then its end", async () => {
    vendor.generation = { kind: "succeed", after: 3 };
    let taskId = 0;
    const stream = followOnB("/api/compat/videosTasks/events", (events) => events.some((e) => e.data.task_id === taskId && e.data.status === "success"));
    await stream.opened;
    taskId = await create();
    const statuses = (await stream.done).filter((e) => e.data.task_id === taskId).map((e) => e.data.status);
    expect(statuses[0]).toBe("pending");
    expect(statuses.at(-1)).toBe("success");
  });

  it("given a task created on edge A, when its stream is followed on edge B at once, then it misses nothing and ends with its final state", async () => {
    vendor.generation = { kind: "succeed", after: 4 };
    const taskId = await create();
    const events = await followOnB(`/api/compat/videosTask/events?id=${taskId}`, (e) => e.at(-1)?.data.status === "success").done;
    const statuses = events.map((e) => e.data.status);
    expect(statuses).toEqual(["pending", "running", "success"].slice(-statuses.length));
    const ids = events.map((e) => Number(e.id));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  });

  it("the feed reads openings while an account stream is open, and for a while after the last one closed, staying current", async () => {
    const fed: boolean[] = [];
    const views = { apply: () => undefined, setFed: (current: boolean) => void fed.push(current), peek: () => undefined, learn: () => undefined };
    const hub = new TaskEventHub(app.nats, new TaskLog(app.nats.js, app.nats.jsm), silentLog, views, 300);
    await hub.start();
    try {
      expect(hub.readsOpenings).toBe(false);
      const first = hub.subscribeAccount("north", () => undefined);
      const second = hub.subscribeAccount("south", () => undefined);
      expect(hub.readsOpenings).toBe(true);
      first();
      second();
      expect(hub.readsOpenings).toBe(true);
      await expect.poll(() => hub.readsOpenings, { timeout: 3_000, interval: 50 }).toBe(false);
      // Reopened on purpose, not lost: the edge's views stayed current throughout (and /healthz with them).
      expect(hub.behindReason()).toBeUndefined();
      expect(fed.filter((current) => !current)).toEqual([]);
    } finally {
      hub.stop();
    }
  });
});
