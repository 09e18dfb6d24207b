import type { JsMsg } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "../contracts/videoTask.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { Settlement } from "../services/billing/settlement.ts";
import { registry } from "../services/shared/metrics/metrics.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { TaskLog, type TaskLogEntry } from "../services/shared/taskLog.ts";
import { openTask } from "./helpers/openTask.ts";
import { silentLog } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";

const at = new Date().toISOString();
const succeeded = (taskId: number): TaskEvent => ({
  type: "GenerationSucceeded",
  data: { video: { object: "v", bytes: 1, contentType: "video/mp4" }, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 },
  meta: { schema: 1, taskId, version: 2, at },
});
const entry = (account: string, event: TaskEvent): TaskLogEntry => ({ event, account, seq: 0, msg: { headers: undefined } as unknown as JsMsg });
const problems = async () => (await registry.getSingleMetric("reelay_settlement_problems_total")?.get())?.values.reduce((sum, v) => sum + v.value, 0) ?? 0;

describe("settlement is never silent", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  let ledger: AccountLedger;
  let settlement: Settlement;
  const errors: string[] = [];
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "settlement-test", { replicas: 1, leaseMs: 5_000 });
    ledger = new AccountLedger(nats);
    const log = silentLog.child({});
    log.error = ((_: unknown, message: string) => void errors.push(message)) as typeof log.error;
    settlement = new Settlement(ledger, new TaskLog(nats.js, nats.jsm), log);
  });
  afterAll(async () => {
    await nats?.nc.close();
    await server?.stop();
  });

  /** A batch handed to settlement, once its charges are written (they are written behind the batch). */
  const settled = async (entries: Parameters<Settlement["handleEntries"]>[0]) => (await settlement.handleEntries(entries)).durable;

  it("given an opened task, when its success is settled twice (a redelivery), then it is charged once and nothing is reported", async () => {
    await ledger.execute("acme", { type: "credit", amountMicros: 10_000_000, creditId: "acme-1" });
    await openTask(ledger, "acme", 1, { amountMicros: 5_009_400 });
    const before = await problems();
    await settled([entry("acme", succeeded(1))]);
    await settled([entry("acme", succeeded(1))]);
    const account = await ledger.current("acme");
    expect([account.balanceMicros, account.reservedMicros]).toEqual([10_000_000 - 5_009_400, 0]);
    expect(await problems()).toBe(before);
    expect(errors).toEqual([]);
  });

  it("given a ledger write that fails once (NATS trouble), then the settlement is tried again and the task is charged once, its batch kept only then", async () => {
    await ledger.execute("retried", { type: "credit", amountMicros: 10_000_000, creditId: "retried-1" });
    await openTask(ledger, "retried", 3, { amountMicros: 5_009_400, msgID: "open-retried-3" });
    let failures = 1;
    const flaky = Object.assign(Object.create(ledger) as AccountLedger, {
      close: (...args: Parameters<AccountLedger["close"]>) => (failures-- > 0 ? Promise.reject(new Error("request timed out")) : ledger.close(...args)),
    });
    const retrying = new Settlement(flaky, new TaskLog(nats.js, nats.jsm), silentLog);
    await (await retrying.handleEntries([entry("retried", succeeded(3))])).durable;
    expect(failures).toBe(-1);
    const account = await ledger.current("retried");
    expect([account.balanceMicros, account.reservedMicros]).toEqual([10_000_000 - 5_009_400, 0]);
  });

  it("given a final task that has no opening under its account, then it is an error an operator sees, never a quiet zero", async () => {
    await openTask(ledger, "owner", 2, { amountMicros: 0 });
    const before = await problems();
    await settled([entry("someone-else", succeeded(2))]);
    expect(await problems()).toBe(before + 1);
    expect(errors).toEqual([expect.stringMatching(/^settlement: a final task without an opening in its log.*reelay audit/)]);
  });
});
