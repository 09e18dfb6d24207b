import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminAction } from "../contracts/admin.ts";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { arkSampleVideo } from "./fakes/arkUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { reelayInProcess } from "./helpers/cliInProcess.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";
import { openTask } from "./helpers/openTask.ts";

/**
 * The admin API on its own loopback listener: admin tokens from the CLI, every route with zod-checked input
 * and `{"error": {"message", "code"}}` errors, changes recorded with the token's name, OpenAPI generated
 * from the same schemas. Customer keys never open admin routes and admin tokens never open customer routes.
 */
describe("admin API", () => {
  let app: TestApp;
  let token: string;

  beforeAll(async () => {
    // Tasks run on the instant scripted vendor (a real MP4, no render): this file is about the admin side.
    app = await startTestApp({ admin: true, providers: () => new ScriptedVendor({}, arkSampleVideo()) });
    const created = await reelayInProcess(app, "admin", "tokens", "create", "--name", "ops-alice");
    token = created.stdout.trim().split("\n").at(-1) ?? "";
  });
  afterAll(async () => {
    await app?.stop();
  });

  const admin = async (method: string, path: string, body?: unknown, bearer: string = token) => {
    const answer = await fetch(`${app.adminUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${bearer}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: answer.status, body: (await answer.json()) as Record<string, unknown> & { error?: { message: string; code: string } } };
  };

  it("an admin token is printed alone on the last line, listed by id, and listens only on loopback", async () => {
    expect(token).toMatch(/^rla_[A-Za-z0-9_-]{32}$/);
    expect(app.adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/admin\/v1$/);
    const listed = await reelayInProcess(app, "admin", "tokens", "list");
    expect(listed.stdout).toMatch(/^[0-9a-f]{12}\tops-alice\t/m);
    expect(listed.stdout).not.toContain(token);
  });

  it("without an admin token, with a customer key or a revoked token: 401 in the admin shape; an admin token opens no customer route", async () => {
    const customerKey = await app.keyFor("someone", 1);
    for (const bearer of ["", customerKey, "rla_not-a-token"]) {
      const answer = await admin("GET", "/accounts", undefined, bearer);
      expect(answer.status).toBe(401);
      expect(answer.body.error?.code).toBe("invalid_admin_token");
    }
    // A customer key is told it is one (whether it is valid or not), not left to look for a typo.
    expect((await admin("GET", "/accounts", undefined, customerKey)).body.error?.message).toBe(
      "invalid admin token: this is a customer API key (rly_…); the admin API takes an admin token (rla_…, reelay admin tokens create --name <you>)",
    );
    expect((await admin("GET", "/accounts", undefined, "rla_not-a-token")).body.error?.message).toBe("invalid admin token");
    expect((await new VideoClient(app.baseUrl, token).query(1)).status).toBe(401);
    const spare = (await reelayInProcess(app, "admin", "tokens", "create", "--name", "ops-temp")).stdout.trim().split("\n").at(-1) ?? "";
    expect((await admin("GET", "/accounts", undefined, spare)).status).toBe(200);
    await reelayInProcess(app, "admin", "tokens", "revoke", "ops-temp");
    expect((await admin("GET", "/accounts", undefined, spare)).status).toBe(401);
  });

  it("accounts: create, credit exactly, show, list, and the ledger names who credited", async () => {
    expect(await admin("POST", "/accounts", { name: "acme" })).toMatchObject({ status: 201, body: { name: "acme", balance: "0.000000" } });
    expect((await admin("POST", "/accounts", { name: "acme" })).body.error?.message).toMatch(/already exists/);
    expect(await admin("POST", "/accounts/acme/credit", { amount: "12.345678" })).toMatchObject({ status: 200, body: { balance: "12.345678", available: "12.345678" } });
    expect(await admin("GET", "/accounts/acme")).toMatchObject({ status: 200, body: { name: "acme", balance: "12.345678", reserved: "0.000000" } });
    await expect.poll(async () => ((await admin("GET", "/accounts")).body.accounts as Array<{ name: string }>).map((a) => a.name)).toContain("acme");
    const ledger = await admin("GET", "/accounts/acme/ledger?limit=1");
    expect(ledger.body.entries).toMatchObject([{ type: "AccountCredited", balance: "12.345678", actor: "ops-alice", description: expect.stringMatching(/credited 12\.345678 .* by ops-alice/) }]);
    expect(ledger.body.next_before).toEqual(expect.any(Number));
    const older = await admin("GET", `/accounts/acme/ledger?before=${String(ledger.body.next_before)}`);
    expect((older.body.entries as Array<{ type: string }>).map((e) => e.type)).toEqual(["AccountOpened"]);

    const actions: AdminAction[] = [];
    const consumer = await app.nats.js.consumers.get(STREAMS.adminLog.name);
    const last = (await app.nats.jsm.streams.info(STREAMS.adminLog.name)).state.last_seq;
    for await (const msg of await consumer.consume()) {
      actions.push(AdminAction.parse(msg.json()));
      if (msg.seq >= last) break;
    }
    expect(actions.map((a) => [a.actor, a.action, a.target])).toEqual([
      ["ops-alice", "account.create", "acme"],
      ["ops-alice", "account.credit", "acme"],
    ]);
  });

  it.each([
    ["more than 6 decimals", { amount: "1.1234567" }],
    ["a negative amount", { amount: "-5" }],
    ["a number instead of a decimal string", { amount: 5 }],
    ["zero", { amount: "0" }],
    ["an unknown field", { amount: "1", currency: "USD" }],
  ])("credit refuses %s with a 400 naming the field, and credits nothing", async (name, body) => {
    await admin("POST", "/accounts", { name: "strict" });
    const answer = await admin("POST", "/accounts/strict/credit", body);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: "invalid_request", message: expect.stringMatching(/amount|currency|body/) });
    // What is not yuan's form says how to write yuan (zero and unknown fields have their own words).
    if (name === "zero" || name === "an unknown field") return;
    expect(answer.body.error).toMatchObject({ message: 'body.amount: must be yuan as a decimal string with at most 6 decimals, such as "12.50"' });
    expect((await admin("GET", "/accounts/strict")).body.balance).toBe("0.000000");
  });

  it("keys: create (shown once) works on the customer API; list shows ids; delete revokes it", async () => {
    await admin("POST", "/accounts", { name: "keyed" });
    await admin("POST", "/accounts/keyed/credit", { amount: "100" });
    const created = await admin("POST", "/accounts/keyed/keys");
    expect(created).toMatchObject({ status: 201, body: { account: "keyed", key: expect.stringMatching(/^rly_/) } });
    const client = new VideoClient(app.baseUrl, String(created.body.key));
    const task = await client.create({ model: "VideoModel-2.0-mini", prompt: "from an admin-made key", duration: 4 });
    expect(task.status).toBe(200);
    expect((await admin("GET", "/accounts/keyed/keys")).body.keys).toEqual([{ id: created.body.id, account: "keyed", created_at: expect.any(String) }]);
    expect(await admin("DELETE", `/keys/${String(created.body.id)}`)).toMatchObject({ status: 200, body: { id: created.body.id } });
    await expect.poll(async () => (await client.query(1)).status, { timeout: 5_000 }).toBe(401);
    expect((await admin("DELETE", `/keys/${String(created.body.id)}`)).status).toBe(404);
  });

  it("tasks: listed by account and across accounts, one task with its timeline and ledger effects", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("watched", 100));
    const taskId = (await client.create({ model: "VideoModel-2.0-mini", prompt: "admin watches", duration: 4 })).body.data?.task_id as number;
    await client.waitForFinal(taskId, 30_000);
    await expect.poll(async () => (await app.ledger.current("watched")).reservedMicros).toBe(0);
    await expect.poll(async () => ((await admin("GET", "/tasks?account=watched")).body.tasks as Array<{ task_id: number; status: string }>)[0]).toMatchObject({ task_id: taskId, status: "success" });
    const everyone = await admin("GET", "/tasks?status=success&limit=50");
    expect((everyone.body.tasks as Array<{ task_id: number }>).map((t) => t.task_id)).toContain(taskId);
    const detail = await admin("GET", `/tasks/${taskId}`);
    expect(detail.body).toMatchObject({ task_id: taskId, account: "watched", status: "success", video_url: expect.stringMatching(/\/videos\/.+\.mp4$/) });
    const types = (detail.body.timeline as Array<{ type: string }>).map((entry) => entry.type);
    expect(types).toEqual(expect.arrayContaining(["TaskSubmitted", "GenerationSucceeded", "ledger:CostReserved", "ledger:ReservationSettled"]));
    expect((await admin("GET", "/tasks/999999")).status).toBe(404);
    expect((await admin("GET", "/tasks?limit=5000")).body.error?.message).toBe("query.limit: must be an integer from 1 to 200");
    expect((await admin("GET", "/tasks?limit=abc")).body.error?.message).toBe("query.limit: must be an integer from 1 to 200");
    expect((await admin("GET", "/tasks?before=-3")).body.error?.message).toBe("query.before: must be a positive integer: the next_before of the page before");
  });

  it("stats and usage come from counters: tasks by status now, per hour over 24 h, and per account, model or day (also as CSV)", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("counted", 100));
    const taskId = (await client.create({ model: "VideoModel-2.0-mini", prompt: "counted", duration: 4 })).body.data?.task_id as number;
    await client.waitForFinal(taskId, 30_000);
    const today = new Date().toISOString().slice(0, 10);
    // VideoModel-2.0-mini, 4 s, 16:9: 87,300 tokens at 23 yuan per million.
    await expect
      .poll(async () => ((await admin("GET", `/usage?group_by=account&from=${today}&to=${today}`)).body.rows as Array<{ key: string }>).find((row) => row.key === "counted"))
      .toEqual({ key: "counted", tasks_created: 1, tasks_succeeded: 1, tasks_failed: 0, tokens: 87_300, charged: "2.007900" });
    const stats = await admin("GET", "/stats");
    expect(stats.body.tasks).toMatchObject({ success: expect.any(Number), pending: expect.any(Number) });
    expect((stats.body.tasks as { success: number }).success).toBeGreaterThanOrEqual(1);
    const hours = stats.body.hours as Array<{ hour: string; created: number; charged: string }>;
    expect(hours).toHaveLength(24);
    expect(hours.at(-1)?.created).toBeGreaterThanOrEqual(1);
    const byModel = await admin("GET", "/usage?group_by=model");
    expect((byModel.body.rows as Array<{ key: string }>).map((row) => row.key)).toContain("VideoModel-2.0-mini");
    const csv = await fetch(`${app.adminUrl}/usage?group_by=account&from=${today}&to=${today}`, { headers: { authorization: `Bearer ${token}`, accept: "text/csv" } });
    expect(csv.headers.get("content-type")).toMatch(/^text\/csv/);
    const lines = (await csv.text()).trim().split("\n");
    expect(lines[0]).toBe("account,tasks_created,tasks_succeeded,tasks_failed,tokens,charged_yuan");
    expect(lines).toContain("counted,1,1,0,87300,2.007900");
    expect((await admin("GET", "/usage?from=2026-13-01")).status).toBe(400);
  });

  it("ledger pages of a busy account: reserves written as one message (a group commit) are never split across pages, and each event streams as its own frame", async () => {
    const controller = new AbortController();
    const answer = await fetch(`${app.adminUrl}/events`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
    const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    const frames = () => text.match(/event: ledger\ndata: \{"type":"(CostReserved|ReservationReleased)"/g)?.length ?? 0;
    const seen = (async () => {
      while (frames() < 12) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString("utf8");
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await app.ledger.execute("grouped", { type: "credit", amountMicros: 1_000_000, creditId: "grouped-admin" });
    for (let index = 0; index < 6; index++) await openTask(app.ledger, "grouped", 800_000 + index, { amountMicros: 1_000 });
    // Released together: a group commit, sent as one frame per event.
    await Promise.all(Array.from({ length: 6 }, (_, index) => app.ledger.execute("grouped", { type: "release", taskId: 800_000 + index, reason: "test" })));
    await Promise.race([seen, new Promise((resolve) => setTimeout(resolve, 10_000))]);
    controller.abort();
    expect(frames()).toBe(12);
    type Page = { entries: Array<{ sequence: number; type: string }>; next_before: number | null };
    const entries: Array<Page["entries"][number] & { page: number }> = [];
    let before: number | null | undefined;
    for (let page = 0; before !== null && page < 20; page++) {
      const answer = (await admin("GET", `/accounts/grouped/ledger?limit=2${before ? `&before=${before}` : ""}`)).body as Page;
      entries.push(...answer.entries.map((entry) => ({ ...entry, page })));
      before = answer.next_before;
    }
    expect(entries.map((entry) => entry.type)).toEqual([
      ...Array.from({ length: 6 }, () => "ReservationReleased"),
      ...Array.from({ length: 6 }, () => "CostReserved"),
      "AccountCredited",
    ]);
    const pagesOfMessage = new Map<number, Set<number>>();
    for (const entry of entries) pagesOfMessage.set(entry.sequence, (pagesOfMessage.get(entry.sequence) ?? new Set()).add(entry.page));
    expect(pagesOfMessage.size, "no message was grouped").toBeLessThan(entries.length);
    for (const [sequence, pages] of pagesOfMessage) expect(pages.size, `message ${sequence} split across pages`).toBe(1);
  });

  it("events: every task and ledger event from now on, as SSE; its consumers go when the console leaves", async () => {
    const consumers = async () => (await app.nats.jsm.streams.info(STREAMS.events.name)).state.consumer_count;
    const consumersBefore = await consumers();
    const controller = new AbortController();
    const answer = await fetch(`${app.adminUrl}/events`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
    expect(answer.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = (answer.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    const seen = (async () => {
      while (!(text.includes("event: ledger") && text.includes('"type":"GenerationSucceeded"'))) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString("utf8");
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const client = new VideoClient(app.baseUrl, await app.keyFor("streamed", 10));
    const taskId = (await client.create({ model: "VideoModel-2.0-mini", prompt: "streamed", duration: 4 })).body.data?.task_id as number;
    await Promise.race([seen, new Promise((resolve) => setTimeout(resolve, 20_000))]);
    controller.abort();
    expect(text).toContain("event: task");
    expect(text).toContain(`"taskId":${taskId}`);
    expect(text).toMatch(/event: ledger\ndata: \{"type":"(AccountCredited|CostReserved)"/);
    // Its two consumers are deleted (the server kept each 5 minutes after its last pull).
    await expect.poll(consumers).toBe(consumersBefore);
    expect((await fetch(`${app.adminUrl}/events`)).status).toBe(401);
  });

  it("channels: each channel's fleet-wide use, from the shared state", async () => {
    const answer = await admin("GET", "/channels");
    expect(answer.status).toBe(200);
    const channels = answer.body.channels as Array<{ channel: string; maxInFlight: number; inFlight: number; waitingByAccount: Record<string, number> }>;
    expect(channels.length).toBeGreaterThan(0);
    expect(channels[0]).toMatchObject({ maxInFlight: expect.any(Number), inFlight: expect.any(Number), waitingByAccount: expect.any(Object) });
  });

  it("OpenAPI 3.1 is generated from the same schemas; unknown paths answer in the admin shape", async () => {
    const document = (await (await fetch(`${app.adminUrl}/openapi.json`)).json()) as { openapi: string; paths: Record<string, Record<string, { requestBody?: unknown; parameters?: unknown[] }>> };
    expect(document.openapi).toBe("3.1.0");
    expect(Object.keys(document.paths)).toEqual(
      expect.arrayContaining(["/admin/v1/accounts", "/admin/v1/stats", "/admin/v1/usage", "/admin/v1/accounts/{name}/credit", "/admin/v1/accounts/{name}/ledger", "/admin/v1/keys/{id}", "/admin/v1/tasks", "/admin/v1/tasks/{id}", "/admin/v1/channels"]),
    );
    expect(JSON.stringify(document.paths["/admin/v1/accounts/{name}/credit"]?.post?.requestBody)).toContain("decimal string");
    const unknown = await fetch(`${app.adminUrl}/nothing-here`, { headers: { authorization: `Bearer ${token}` } });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });
});
