import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { normalizeVideoRequest } from "../services/edge/video/normalizeRequest.ts";
import { loadConfig } from "../services/shared/config.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { callbackEndpoint, type CallbackEndpoint } from "./helpers/callbackEndpoint.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/**
 * The dispatcher's slots, fewer than shipped (1,000) so the flood that held them all is a tenth as long; and
 * the tasks one account creates with a dead callback: more status-change jobs (pending, success) than that.
 */
const SLOTS = 100;
const DEAD_TASKS = 60;
/** The shipped defaults, set explicitly so the test reads the same against any dispatcher. */
const PER_ACCOUNT = 10;
const PAUSE_AFTER = 10;

/** Issue 32, part B: one account's webhooks cannot take another account's deliveries away. */
describe("adversarial webhooks", () => {
  let app: TestApp;
  let dead: CallbackEndpoint;
  let live: CallbackEndpoint;

  beforeAll(async () => {
    [dead, live] = await Promise.all([callbackEndpoint({ status: 503 }), callbackEndpoint()]);
    app = await startTestApp({
      providers: () => new ScriptedVendor(),
      tweak: (config) => {
        config.webhooks.allowHttp = true;
        config.webhooks.allowPrivateAddresses = true;
        config.webhooks.firstBackoffMs = 50;
        config.webhooks.maxBackoffMs = 60_000;
        config.webhooks.maxInFlight = SLOTS;
        config.webhooks.maxInFlightPerAccount = PER_ACCOUNT;
        config.webhooks.pauseAfterFailures = PAUSE_AFTER;
      },
    });
  });
  afterAll(async () => {
    await app?.stop();
    await Promise.all([dead?.stop(), live?.stop()]);
  });

  it("one account's many dead callbacks do not delay another account's webhook (was: all the dispatcher's slots held, none arrived in 90 s)", async () => {
    const flooder = new VideoClient(app.baseUrl, await app.keyFor("flooder"));
    for (let i = 0; i < DEAD_TASKS; i += 50) {
      await Promise.all(Array.from({ length: 50 }, () => flooder.create({ model: "VideoModel-2.0-mini", prompt: "flood", duration: 4, callback_url: dead.url })));
    }
    // Every status change of the flood is queued ahead of the neighbour's: more jobs than the dispatcher's slots.
    await expect.poll(async () => (await app.nats.jsm.streams.info("WEBHOOK_JOBS")).state.messages, { timeout: 20_000 }).toBeGreaterThanOrEqual(SLOTS + 10);
    expect(dead.arrivals.length).toBeGreaterThanOrEqual(PAUSE_AFTER);

    const neighbour = new VideoClient(app.baseUrl, await app.keyFor("neighbour"));
    const createdAt = Date.now();
    const created = await neighbour.create({ model: "VideoModel-2.0-mini", prompt: "mine", duration: 4, callback_url: live.url });
    expect(created.status).toBe(200);
    await expect.poll(() => live.arrivals.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    expect((live.arrivals[0] ?? Infinity) - createdAt).toBeLessThan(5_000);
    // The dead endpoint was paused after its failures in a row: the jobs still queued make no attempts.
    expect(dead.arrivals.length).toBeLessThanOrEqual(PAUSE_AFTER + PER_ACCOUNT);
  });

  it("the https-only callback rule reads the scheme as the URL parser does: `HTTP://…` and a leading space are refused", () => {
    const config = loadConfig();
    expect(config.webhooks.allowHttp).toBe(false);
    const create = (callbackUrl: string) => () => normalizeVideoRequest({ model: "VideoModel-2.0-mini", prompt: "p", callback_url: callbackUrl }, config);
    expect(create("HTTP://example.com/hook")).toThrow(/callback_url must be an https URL/);
    expect(create("hTtP://example.com/hook")).toThrow(/callback_url must be an https URL/);
    for (const blank of [" http://example.com/hook", "\thttps://example.com/hook", "https://example.com/hook\n", "https://exa\tmple.com/hook"]) {
      expect(create(blank)).toThrow(/callback_url must be an http\(s\) URL without user name, password, spaces or control characters/);
    }
    expect(normalizeVideoRequest({ model: "VideoModel-2.0-mini", prompt: "p", callback_url: "HTTPS://example.com/hook" }, config).callbackUrl).toBe("HTTPS://example.com/hook");
  });
});
