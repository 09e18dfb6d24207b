import type { JetStreamClient } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ApiKeyDirectory } from "../services/edge/auth.ts";
import { eventRoutes } from "../services/edge/events/eventRoutes.ts";
import type { TaskEventHub } from "../services/edge/events/taskEventHub.ts";
import { apiErrorReply } from "../services/edge/http/apiErrors.ts";
import { HttpApp } from "../services/edge/http/httpApp.ts";
import { mountRoutes } from "../services/edge/http/routeTable.ts";
import type { TaskViewReader } from "../services/edge/video/taskViewReader.ts";
import { ServiceUnavailableError } from "../services/shared/errors.ts";
import { sseStreamsOpen } from "../services/shared/metrics/metrics.ts";
import type { TaskLog } from "../services/shared/taskLog.ts";
import { silentLog } from "./helpers/testApp.ts";

/** Event streams whose history cannot be read (NATS out of reach): each answers its error and keeps nothing. */
describe("an event stream whose follow fails", () => {
  const app = new HttpApp({ allowedOrigins: [] }, apiErrorReply(silentLog));
  let base = "";
  let subscribed = 0;
  const unavailable = () => Promise.reject(new ServiceUnavailableError("NATS did not answer in time"));

  beforeAll(async () => {
    // Stand-ins for the edge's parts: a key every request has, a hub with a position, and a history that fails.
    const keys = { authenticate: () => ({ keyId: "k1", account: "acme", createdAt: "2026-11-28T00:00:00Z" }) } as unknown as ApiKeyDirectory;
    const hub = {
      position: 100,
      subscribeAccount: () => (subscribed++, () => void subscribed--),
      subscribeTask: () => (subscribed++, () => void subscribed--),
    } as unknown as TaskEventHub;
    const views = { get: () => Promise.resolve({ taskId: 7, account: "acme", status: "running" }) } as unknown as TaskViewReader;
    const taskLog = { history: unavailable } as unknown as TaskLog;
    const js = { consumers: { get: unavailable } } as unknown as JetStreamClient;
    const routes = eventRoutes({ keys, views, hub, taskLog, js, baseUrl: () => "http://edge", log: silentLog, keepaliveMs: 60_000, streamsPerAccount: 1 });
    mountRoutes(app, routes, silentLog);
    base = `http://127.0.0.1:${await app.listen("127.0.0.1", 0)}`;
  });
  afterAll(() => app.close());

  it("answers the error, and lets its place, its subscription and its keepalive go (the account got 429 for every later stream)", async () => {
    const openBefore = (await sseStreamsOpen.get()).values[0]?.value ?? 0;
    const headers = { authorization: "Bearer rly_test", "last-event-id": "5" };
    const answers: string[] = [];
    const ask = async (path: string) => {
      const answer = await fetch(`${base}${path}`, { headers });
      answers.push(`${answer.status} ${await answer.text()}`);
    };
    // An account's stream has begun before its history is read: the failure is its last event.
    for (let i = 0; i < 3; i++) await ask("/api/compat/videosTasks/events");
    for (let i = 0; i < 3; i++) await ask("/api/compat/videosTask/events?id=7");
    expect(answers.map((answer) => answer.replace(/\s+/g, " ").slice(0, 60))).toEqual([
      ...Array(3).fill(expect.stringMatching(/^200 retry: 2000 event: error data: .*"code":503/)),
      ...Array(3).fill(expect.stringMatching(/^503 \{"code":503,"msg":"NATS did not answer in time"/)),
    ]);
    expect(subscribed).toBe(0);
    expect((await sseStreamsOpen.get()).values[0]?.value ?? 0).toBe(openBefore);
  });
});
