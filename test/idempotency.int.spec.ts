import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { keyHashOf } from "../services/edge/video/idempotencyKeys.ts";
import { KeyedTasks, keyedTaskSources } from "../services/edge/video/keyedTasks.ts";
import { IdempotencyIndex } from "../services/tasks/idempotencyIndex.ts";
import { killHard, startChildService, writeConfigFile } from "./helpers/childService.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

// VideoModel-2.0-mini, 4 s, 16:9: 2.007900 yuan.
const MINI_4S_MICROS = 2_007_900;
const mini = (prompt: string) => ({ model: "VideoModel-2.0-mini", prompt, duration: 4 });

function exited(child: ChildProcess): Promise<NodeJS.Signals | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.signalCode);
    child.once("exit", (_code, signal) => resolve(signal));
  });
}

describe("Idempotency-Key under concurrency, conflicts and crashes", () => {
  let app: TestApp;
  let configPath: string;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    // The instant scripted vendor: this file is about create requests, not rendering.
    app = await startTestApp({ providers: () => new ScriptedVendor() });
    configPath = writeConfigFile(app.config);
  });
  afterAll(async () => {
    await Promise.all(children.map(killHard));
    await app?.stop();
  });

  it("gives 20 concurrent creates with one key on an empty account the same 403, and a retry after a top-up creates once", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("broke", 0));
    const headers = { "idempotency-key": "order-broke" };
    const answers = await Promise.all(Array.from({ length: 20 }, () => client.create(mini("one order"), headers)));
    for (const answer of answers) {
      expect(answer.status).toBe(403);
      expect(answer.body).toEqual({ code: 403, msg: "insufficient balance: this task needs 2.007900 yuan, available 0.000000" });
    }

    await app.ledger.execute("broke", { type: "credit", amountMicros: MINI_4S_MICROS, creditId: "broke-top-up" });
    const retries = await Promise.all(Array.from({ length: 5 }, () => client.create(mini("one order"), headers)));
    const ids = new Set(retries.map((answer) => answer.body.data?.task_id));
    expect(retries.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
    expect(ids.size).toBe(1);
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "broke");
    expect(history.filter((entry) => entry.event.type === "CostReserved")).toHaveLength(1);
  });

  it("answers 422 naming the conflict when a key is reused for a different request", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("reuser"));
    const headers = { "idempotency-key": "order-7" };
    const first = await client.create(mini("a fox"), headers);
    expect(first.status).toBe(200);
    const other = await client.create(mini("a different fox"), headers);
    expect(other.status).toBe(422);
    expect(other.body).toEqual({ code: 422, msg: expect.stringMatching(/^Idempotency-Key was already used with a different request/) });
    // Where the task's status changes go is part of the request (issue 32: the fingerprint ignored it).
    const elsewhere = await client.create({ ...mini("a fox"), callback_url: "https://hooks.example.com/other" }, headers);
    expect(elsewhere.status).toBe(422);
    // Defaults applied count as the same request: duration 4 is what this model would be asked for anyway.
    const same = await client.create({ ...mini("a fox"), ratio: "16:9", generate_audio: true }, headers);
    expect(same.status).toBe(200);
    expect(same.body.data?.task_id).toBe(first.body.data?.task_id);
  });

  it("keeps each account's keys its own: one key, sent by two accounts, makes a task for each, charged to each", async () => {
    const alice = new VideoClient(app.baseUrl, await app.keyFor("key-alice"));
    const mallory = new VideoClient(app.baseUrl, await app.keyFor("key-mallory"));
    const headers = { "idempotency-key": "order-shared" };
    const ofAlice = await alice.create(mini("alice's fox"), headers);
    // The same key with another body, and with the same body: neither a conflict nor alice's task.
    const otherBody = await mallory.create(mini("mallory's fox"), headers);
    const sameBody = await mallory.create(mini("alice's fox"), { "idempotency-key": "order-shared-2" });
    const sameKeyAndBody = await alice.create(mini("alice's fox"), { "idempotency-key": "order-shared-2" });
    expect([ofAlice.status, otherBody.status, sameBody.status, sameKeyAndBody.status]).toEqual([200, 200, 200, 200]);
    const ids = [ofAlice, otherBody, sameBody, sameKeyAndBody].map((answer) => answer.body.data?.task_id);
    expect(new Set(ids).size).toBe(4);
    // Neither sees the other's task.
    expect((await mallory.query(ids[0] as number)).status).toBe(404);
    for (const account of ["key-alice", "key-mallory"]) {
      const history = await readAccountHistory(app.nats.js, app.nats.jsm, account);
      expect(history.filter((entry) => entry.event.type === "CostReserved")).toHaveLength(2);
    }
  });

  it("answers the same task when the edge died after writing the task's opening, before answering", async () => {
    // This edge kills itself (SIGKILL) right after the opening (task and reservation) is written.
    const env = { NATS_URL: app.natsUrl, REELAY_CONFIG: configPath, REELAY_FAILPOINTS: "create:after-open" };
    const doomed = await startChildService(["edge"], env);
    const { port } = doomed;
    children.push(doomed);
    const key = await app.keyFor("crashy", 10);
    const headers = { "idempotency-key": "order-crash" };
    const dying = new VideoClient(`http://127.0.0.1:${port}`, key).create(mini("survives a crash"), headers);
    await expect(dying).rejects.toThrow();
    expect(await exited(doomed)).toBe("SIGKILL");

    const client = new VideoClient(app.baseUrl, key);
    const retried = await client.create(mini("survives a crash"), headers);
    expect(retried.status).toBe(200);
    const taskId = retried.body.data?.task_id as number;
    expect((await client.waitForFinal(taskId)).body.data?.status).toBe("success");
    const again = await client.create(mini("survives a crash"), headers);
    expect(again.body.data?.task_id).toBe(taskId);

    // One task, one charge, nothing left reserved.
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "crashy");
    expect(history.filter((entry) => entry.event.type === "CostReserved")).toHaveLength(1);
    await expect
      .poll(async () => {
        const account = await app.ledger.current("crashy");
        return [account.balanceMicros, account.reservedMicros];
      }, { timeout: 10_000 })
      .toEqual([10_000_000 - MINI_4S_MICROS, 0]);
  });

  it("finds a key's task in the key index once the stream's duplicate window is past, without writing anything", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("indexed"));
    const headers = { "idempotency-key": "order-indexed" };
    const first = await client.create(mini("indexed fox"), headers);
    const taskId = first.body.data?.task_id as number;
    const index = new IdempotencyIndex(app.nats.js, app.nats.idempotency);
    await expect.poll(() => index.find("indexed", keyHashOf("order-indexed"))).toMatchObject({ taskId });
    const before = (await app.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    const retried = await client.create(mini("indexed fox"), headers);
    expect(retried.body.data?.task_id).toBe(taskId);
    expect((await client.create(mini("another fox"), headers)).status).toBe(422);
    const after = (await app.nats.jsm.streams.info(STREAMS.events.name)).state.last_seq;
    // Whatever the task itself wrote meanwhile, no second opening: the account still has one reservation.
    expect(after).toBeGreaterThanOrEqual(before);
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "indexed");
    expect(history.filter((entry) => entry.event.type === "CostReserved")).toHaveLength(1);
  });
});

describe("Idempotency-Key while the key index lags past the duplicate window (no task-log reactors running)", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ services: ["edge", "runner"], providers: () => new ScriptedVendor() });
  });
  afterAll(async () => {
    await app?.stop();
  });

  it("finds the key's task in the account's openings, where neither the index nor the server's msgID memory may have it", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("lagging"));
    const first = await client.create(mini("lagging fox"), { "idempotency-key": "order-lagging" });
    const taskId = first.body.data?.task_id as number;
    const index = new IdempotencyIndex(app.nats.js, app.nats.idempotency);
    const keyHash = keyHashOf("order-lagging");
    expect(await index.find("lagging", keyHash), "no reactor wrote the index").toBeUndefined();
    const sources = keyedTaskSources(app.nats.jsm, index);
    // Now the opening is in the duplicate window: a retry's write finds it by its msgID, nothing is read here.
    expect(await new KeyedTasks(sources).find("lagging", keyHash)).toBeUndefined();
    // Three minutes on the server would have forgotten the msgID: the reactors' floor says the index may miss it.
    const later = new KeyedTasks({ ...sources, now: () => Date.now() + 3 * 60_000 });
    expect(await later.find("lagging", keyHash)).toMatchObject({ taskId });
    expect(await later.find("lagging", keyHashOf("another key"))).toBeUndefined();
  });
});
