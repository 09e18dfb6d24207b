import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { availableMicros } from "../services/billing/account.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

// VideoModel-2.0-mini, 4 s, 16:9: 1280·720·97/1024 = 87,300 tokens × 23 ¥/M = 2.007900 ¥.
const MINI_4S_MICROS = 2_007_900;
const mini = (prompt: string) => ({ model: "VideoModel-2.0-mini", prompt, duration: 4 });

describe("billing: reserve, settle, release", () => {
  let app: TestApp;
  // The instant scripted vendor: this file is about money, not rendering.
  const vendor = new ScriptedVendor();
  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor });
  });
  afterAll(async () => app?.stop());

  it("reserves at create, charges the real cost once on success, and reports total_tokens and cost", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("payer", 10));
    const created = await client.create(mini("a paid video"));
    expect(created.status).toBe(200);
    const taskId = created.body.data?.task_id as number;
    const final = await client.waitForFinal(taskId);
    expect(final.body.data).toMatchObject({ total_tokens: 87_300, cost: 2.0079 });
    await expect
      .poll(async () => {
        const account = await app.ledger.current("payer");
        return [account.balanceMicros, account.reservedMicros];
      })
      .toEqual([10_000_000 - MINI_4S_MICROS, 0]);
  });

  it("answers 403 naming insufficient balance, and reserves and creates nothing", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("poor", 1));
    const before = await app.ledger.current("poor");
    const refused = await client.create(mini("too expensive"));
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ code: 403, msg: "insufficient balance: this task needs 2.007900 yuan, available 1.000000" });
    const after = await app.ledger.current("poor");
    expect(after).toEqual(before);
  });

  it("releases the reservation of a failed task: failed work is free", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("unlucky", 10));
    vendor.generation = { kind: "fail", after: 1, reason: "the generation failed" };
    const created = await client.create({ model: "VideoModel-2.0", prompt: "fails upstream", duration: 4 });
    const final = await client.waitForFinal(created.body.data?.task_id as number);
    vendor.generation = { kind: "succeed", after: 1 };
    expect(final.status).toBe(500);
    await expect.poll(async () => (await app.ledger.current("unlucky")).reservedMicros).toBe(0);
    expect((await app.ledger.current("unlucky")).balanceMicros).toBe(10_000_000);
  });

  it("a retried create with the same Idempotency-Key returns the same task and reserves nothing new", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("retrier", 10));
    const headers = { "idempotency-key": "order-42" };
    const first = await client.create(mini("once"), headers);
    const again = await client.create(mini("once"), headers);
    expect(again.status).toBe(200);
    expect(again.body.data?.task_id).toBe(first.body.data?.task_id);
    const other = await client.create(mini("a different order"), { "idempotency-key": "order-43" });
    expect(other.body.data?.task_id).not.toBe(first.body.data?.task_id);
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "retrier");
    expect(history.filter((entry) => entry.event.type === "CostReserved")).toHaveLength(2);
    expect(availableMicros(await app.ledger.current("retrier"))).toBe(10_000_000 - 2 * MINI_4S_MICROS);
  });

  it("keys are per account: the same Idempotency-Key on another account makes its own task", async () => {
    const a = new VideoClient(app.baseUrl, await app.keyFor("tenant-a", 10));
    const b = new VideoClient(app.baseUrl, await app.keyFor("tenant-b", 10));
    const headers = { "idempotency-key": "shared-key" };
    const fromA = await a.create(mini("a"), headers);
    const fromB = await b.create(mini("b"), headers);
    expect(fromB.body.data?.task_id).not.toBe(fromA.body.data?.task_id);
  });
});
