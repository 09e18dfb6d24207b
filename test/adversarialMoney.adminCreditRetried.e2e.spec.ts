import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reelayInProcess } from "./helpers/cliInProcess.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * Issue 32: "admin credits ignore Idempotency-Key (a retried credit counts twice)". A credit with a key lands
 * once, through the admin API and through `reelay accounts credit`, however often and however late it is
 * retried (the account remembers the key's credit), and a key names one credit: another amount with it is 422.
 */
describe("adversarial money: a retried admin credit counts once", () => {
  let app: TestApp;
  let token: string;

  beforeAll(async () => {
    app = await startTestApp({ admin: true, services: ["edge"] });
    const created = await reelayInProcess(app, "admin", "tokens", "create", "--name", "ops-bob");
    token = created.stdout.trim().split("\n").at(-1) ?? "";
  });
  afterAll(async () => {
    await app?.stop();
  });

  const credit = async (account: string, amount: string, key?: string) => {
    const answer = await fetch(`${app.adminUrl}/accounts/${account}/credit`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}) },
      body: JSON.stringify({ amount }),
    });
    return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
  };

  it("the admin API: the same credit sent three times with one Idempotency-Key adds it once", async () => {
    await app.ledger.execute("retried", { type: "open" });
    const answers = await Promise.all([credit("retried", "10", "order-1"), credit("retried", "10", "order-1")]);
    answers.push(await credit("retried", "10", "order-1"));
    for (const answer of answers) expect(answer).toMatchObject({ status: 200 });
    expect((await app.ledger.current("retried")).balanceMicros).toBe(10_000_000);
    // After a restart of every process (nothing cached), still once.
    app.ledger.forget();
    expect(await credit("retried", "10", "order-1")).toMatchObject({ status: 200, body: { balance: "10.000000" } });
  });

  it("the admin API: a key names one credit (another amount with it is 422), another key is another credit, keys are per account", async () => {
    await app.ledger.execute("keyed", { type: "open" });
    await app.ledger.execute("other", { type: "open" });
    await credit("keyed", "5", "k");
    expect(await credit("keyed", "6", "k")).toMatchObject({ status: 422 });
    await credit("keyed", "5", "k2");
    await credit("other", "5", "k");
    expect((await app.ledger.current("keyed")).balanceMicros).toBe(10_000_000);
    expect((await app.ledger.current("other")).balanceMicros).toBe(5_000_000);
    // Without a key every credit is its own.
    await credit("other", "1");
    await credit("other", "1");
    expect((await app.ledger.current("other")).balanceMicros).toBe(7_000_000);
  });

  it("operators set the credit limit through the admin API and the CLI (0 by default: no debt)", async () => {
    await app.ledger.execute("limited", { type: "open" });
    const answer = await fetch(`${app.adminUrl}/accounts/limited/credit-limit`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ limit: "2.5" }),
    });
    expect({ status: answer.status, body: await answer.json() }).toMatchObject({ status: 200, body: { balance: "0.000000", available: "2.500000", credit_limit: "2.500000" } });
    const cli = await reelayInProcess(app, "accounts", "limit", "limited", "0");
    expect(cli).toMatchObject({ code: 0, stdout: "credit limit of limited is 0.000000 yuan; available 0.000000\n" });
    expect((await app.ledger.current("limited")).creditLimitMicros).toBe(0);
  });

  it("reelay accounts credit --idempotency-key: a retried command credits once", async () => {
    for (let i = 0; i < 2; i++) {
      const result = await reelayInProcess(app, "accounts", "credit", "cli-retried", "3.5", "--idempotency-key", "invoice-9");
      expect(result.code).toBe(0);
    }
    expect((await app.ledger.current("cli-retried")).balanceMicros).toBe(3_500_000);
  });
});
