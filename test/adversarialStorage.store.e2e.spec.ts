import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProviderSettings } from "../contracts/config.ts";
import { OBJECT_STORES, STREAMS } from "../infra/jetstreamLayout.ts";
import { FAKE_MP4, OpenAiVideosUpstream } from "./fakes/openAiVideosUpstream.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const KEY_VARIABLE = "REELAY_TEST_STORAGE_STORE_KEY";
const MIB = 1024 * 1024;
/** A 1×1 PNG padded to 900 KB (what follows IEND is never decoded): a large upload that passes every check. */
const PNG_1X1 = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");
const BIG_PNG = Buffer.concat([PNG_1X1, Buffer.alloc(900 * 1024 - PNG_1X1.length)]);

/** Issue 32, the object stores: who can fill them, how much, for how long, and what a full one does to the rest. */
describe("adversarial storage: uploads and the stores", () => {
  const upstream = new OpenAiVideosUpstream("sk-store");
  let app: TestApp;

  beforeAll(async () => {
    await upstream.start();
    process.env[KEY_VARIABLE] = "sk-store";
    app = await startTestApp({
      tweak: (config) => {
        config.providers.sora = ProviderSettings.parse({ kind: "openai", baseUrl: upstream.baseUrl, apiKeyEnv: KEY_VARIABLE, model: "sora-2", pollFirstAfterMs: 0, pollEveryMs: 20, pollMaxEveryMs: 40, timeoutMs: 2_000, allowPrivateReferenceUrls: true });
        const fast = config.videoModels["VideoModel-2.0-fast"];
        if (fast) fast.provider = "sora";
        config.limits.maxTaskMs = 20_000;
        config.videos.maxStoreBytes = MIB;
        config.videos.referenceStoreBytes = 3 * MIB;
        config.videos.referenceBytesPerAccount = 2 * MIB;
      },
    });
  });
  afterAll(async () => {
    await app?.stop();
    await upstream.stop();
  });

  const storeBytes = async (store: string) => (await app.nats.jsm.streams.info(`OBJ_${store}`)).state.bytes;
  const upload = async (key: string, fields: Record<string, string>, image = BIG_PNG) => {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    form.append("input_reference", new Blob([image], { type: "image/png" }), "first-frame.png");
    const response = await fetch(`${app.baseUrl}/v1/videos`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
    return { status: response.status, body: (await response.json()) as { id?: string; status?: string; error?: { code?: string; message?: string } } };
  };
  const waitForFinal = async (key: string, id: string) => {
    let video: { status?: string; error?: { message?: string } } = {};
    await expect
      .poll(async () => {
        video = (await (await fetch(`${app.baseUrl}/v1/videos/${id}`, { headers: { authorization: `Bearer ${key}` } })).json()) as typeof video;
        return video.status;
      }, { timeout: 10_000, interval: 50 })
      .toMatch(/^(completed|failed)$/);
    return video;
  };

  it("anyone can fill the store: a refused create (unknown model, no balance, bad parameter) stores nothing, nor does a model that ignores the upload", async () => {
    const broke = await app.keyFor("store-broke", 0);
    const rich = await app.keyFor("store-refused", 100);
    const before = await storeBytes(OBJECT_STORES.references);
    const answers = await Promise.all([
      upload(rich, { model: "no-such-model", prompt: "p" }),
      upload(broke, { model: "VideoModel-2.0-fast", prompt: "p", seconds: "4" }),
      upload(rich, { model: "VideoModel-2.0-fast", prompt: "p", seconds: "99" }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([404, 429, 400]);
    expect(answers[1]?.body.error?.code).toBe("insufficient_quota");
    // A model without the image capability ignores the upload (spec rule 6): accepted, and nothing kept for it.
    const ignored = await upload(rich, { model: "VideoModel-2.0-mini", prompt: "p", seconds: "4" });
    expect(ignored.status).toBe(200);
    expect(await storeBytes(OBJECT_STORES.references)).toBe(before);
  });

  it("anyone can fill the store: an account's stored uploads stop at its quota with a clear 4xx, and leave when their tasks end", async () => {
    const key = await app.keyFor("store-quota", 100);
    // Tasks that stay at the upstream hold their references.
    upstream.generation = { kind: "succeed", after: 1_000_000 };
    const held = [await upload(key, { model: "VideoModel-2.0-fast", prompt: "p", seconds: "4" }), await upload(key, { model: "VideoModel-2.0-fast", prompt: "p", seconds: "4" })];
    expect(held.map((answer) => answer.status)).toEqual([200, 200]);
    const over = await upload(key, { model: "VideoModel-2.0-fast", prompt: "p", seconds: "4" });
    expect(over.status).toBe(429);
    expect(over.body.error?.message).toMatch(/reference storage quota.*limit of 2097152 bytes/);
    // The upstream fails them: their references go, and the quota is free again.
    for (const video of upstream.videos.values()) video.generation = { kind: "fail", after: 0, code: "internal_error", message: "gave up" };
    for (const answer of held) expect((await waitForFinal(key, String(answer.body.id))).status).toBe("failed");
    upstream.generation = { kind: "succeed", after: 1_000_000 };
    await expect.poll(async () => (await upload(key, { model: "VideoModel-2.0-fast", prompt: "p", seconds: "4" })).status, { timeout: 5_000 }).toBe(200);
  });

  it("anyone can fill the store: each store has its own max_bytes (discard new), and a full one refuses the new object while EVENTS takes writes", async () => {
    for (const [store, maxBytes] of [[OBJECT_STORES.videos, MIB], [OBJECT_STORES.references, 3 * MIB]] as const) {
      const { config } = await app.nats.jsm.streams.info(`OBJ_${store}`);
      expect({ max_bytes: config.max_bytes, discard: config.discard }).toEqual({ max_bytes: maxBytes, discard: "new" });
    }
    expect((await app.nats.jsm.streams.info(STREAMS.events.name)).config.max_bytes).toBe(-1);

    // A result larger than what is left of the videos store: the copy is refused, the task fails at once, free.
    const key = await app.keyFor("store-full", 100);
    upstream.content = Buffer.concat([FAKE_MP4, Buffer.alloc(MIB + 1)]);
    upstream.generation = { kind: "succeed", after: 1 };
    const client = new VideoClient(app.baseUrl, key);
    const created = await client.create({ model: "VideoModel-2.0-fast", prompt: "p", duration: 4 });
    const done = await client.waitForFinal(created.body.data?.task_id as number, 10_000, 50);
    expect(done.body).toMatchObject({ code: 500, msg: expect.stringMatching(/video store is full.*no charge/) });
    // Settlement releases the reservation after the failure (a reactor on the task log).
    await expect.poll(async () => {
      const account = await app.ledger.current("store-full");
      return [account.balanceMicros, account.reservedMicros];
    }).toEqual([100_000_000, 0]);

    // Fill the references store (the other tests left some in it) until an upload is refused: 503, not a lost ledger write.
    upstream.generation = { kind: "succeed", after: 1_000_000 };
    let refused: Awaited<ReturnType<typeof upload>> | undefined;
    for (let i = 0; i < 4 && !refused; i++) {
      const other = await app.keyFor(`store-filler-${i}`, 100);
      const answer = await upload(other, { model: "VideoModel-2.0-fast", prompt: "p", seconds: "4" });
      if (answer.status !== 200) refused = answer;
    }
    expect(refused?.status).toBe(503);
    expect(refused?.body.error?.message).toMatch(/store for uploaded references is full/);
    // The ledger and the task log still take writes.
    await app.ledger.execute("store-full", { type: "credit", amountMicros: 1_000_000, creditId: "after-full-store" });
    expect((await client.create({ model: "VideoModel-2.0-mini", prompt: "p", duration: 4 })).status).toBe(200);
  });
});
