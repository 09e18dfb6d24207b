import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskOpening } from "../contracts/taskOpening.ts";
import { accountOpenings } from "../contracts/videoTask.ts";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { availableMicros } from "../services/billing/account.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { readWholeStream } from "../services/shared/projectionReplay.ts";
import { auditCharges } from "../services/billing/wholeLog.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { killHard, startChildService, writeConfigFile } from "./helpers/childService.ts";
import { testConfig } from "./helpers/testApp.ts";
import { VideoClient, type Envelope } from "./helpers/videoClient.ts";

type ApiAnswer = { status: number; body: Envelope };

// VideoModel-2.0-mini, 4 s, 16:9: 2.007900 yuan.
const MINI_4S_MICROS = 2_007_900;
const mini = (prompt: string) => ({ model: "VideoModel-2.0-mini", prompt, duration: 4 });
const CREATES = 12;
/** Longer than the client's request timeout (5 s) and the edge's whole write budget (createWriteMs below). */
const FREEZE_MS = 7_000;

/** The account's openings: task id → the Idempotency-Key hash it was made with (if any). */
async function openingsOf(nats: Nats, account: string): Promise<Map<number, string | undefined>> {
  const openings = new Map<number, string | undefined>();
  await readWholeStream(nats.js, nats.jsm, STREAMS.events.name, [accountOpenings(account)], (msg) => {
    const { task } = TaskOpening.parse(msg.json());
    openings.set(task.meta.taskId, task.data.idempotency?.keyHash);
  });
  return openings;
}

describe("creates while nats-server is frozen (SIGSTOP) past the client's request timeout", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-stall-"));
  let server: RunningNatsServer;
  let nats: Nats;
  let ledger: AccountLedger;
  let edgeUrl: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    const config = testConfig((c) => {
      c.runner.leaseMs = 3_000;
      c.limits.submitWaitMs = 300;
      // Gives up before the server comes back: the creates in flight answer 503.
      c.limits.createWriteMs = 3_000;
    });
    nats = await connectNats(server.url, "stall-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    ledger = new AccountLedger(nats);
    const configPath = writeConfigFile(config);
    const env = { NATS_URL: server.url, REELAY_CONFIG: configPath };
    const [edge, ...others] = await Promise.all([startChildService(["edge"], env), startChildService(["scripted-runner"], env), startChildService(["projector"], env)]);
    children.push(edge, ...others);
    edgeUrl = `http://127.0.0.1:${edge.port}`;
  });
  afterAll(async () => {
    process.kill(-server.pid, "SIGCONT");
    await Promise.all(children.map(killHard));
    await nats?.nc.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const keyFor = async (account: string, tasks: number) => {
    await ledger.execute(account, { type: "open" });
    await ledger.execute(account, { type: "credit", amountMicros: tasks * MINI_4S_MICROS, creditId: `${account}-credit` });
    return (await new ApiKeyStore(nats.apiKeys).create(account)).key;
  };

  it("no task runs free, no key makes two tasks, no account goes below zero, every 503 either never ran or is listed and charged", async () => {
    const plainKey = await keyFor("stall-plain", CREATES);
    const plainAuthorization = `Bearer ${plainKey}`;
    const plain = new VideoClient(edgeUrl, plainKey);
    const keyed = new VideoClient(edgeUrl, await keyFor("stall-keyed", CREATES));

    // A client with an Idempotency-Key retries on 503 with the same key, as the 503's message asks.
    const createWithRetries = async (index: number): Promise<ApiAnswer> => {
      const headers = { "idempotency-key": `stall-order-${index}` };
      for (let attempt = 0; ; attempt++) {
        const answer = await keyed.create(mini(`keyed ${index}`), headers);
        if (answer.status !== 503 || attempt >= 40) return answer;
        await sleep(250);
      }
    };
    const plainAnswers = Promise.all(Array.from({ length: CREATES }, (_, index) => plain.create(mini(`plain ${index}`))));
    const keyedAnswers = Promise.all(Array.from({ length: CREATES }, (_, index) => createWithRetries(index)));
    await sleep(5);
    process.kill(-server.pid, "SIGSTOP");
    await sleep(FREEZE_MS);
    process.kill(-server.pid, "SIGCONT");
    const [plainDone, keyedDone] = await Promise.all([plainAnswers, keyedAnswers]);

    const plainStatuses = plainDone.map((answer) => answer.status);
    expect(plainStatuses.every((status) => status === 200 || status === 503), plainStatuses.join()).toBe(true);
    // How many answer 503 depends on where each create's write was when the server froze (one account's writes
    // go one at a time: the first caught mid-write times out, the ones queued behind it are written after the
    // freeze); what must hold below holds whichever it was. The 503 path itself: test/createTask.unit.spec.ts.
    expect(keyedDone.map((answer) => answer.status)).toEqual(keyedDone.map(() => 200));

    // Every task that came to be runs to its end and its money is closed.
    for (const account of ["stall-plain", "stall-keyed"]) {
      await expect.poll(async () => (await ledger.current(account)).reservedMicros, { timeout: 40_000, interval: 250 }).toBe(0);
    }

    // One task per Idempotency-Key, and it is the one every retry of that key was answered with.
    const keyedOpenings = await openingsOf(nats, "stall-keyed");
    expect(keyedOpenings.size).toBe(CREATES);
    expect(new Set(keyedOpenings.values()).size).toBe(CREATES);
    expect(new Set(keyedDone.map((answer) => answer.body.data?.task_id))).toEqual(new Set(keyedOpenings.keys()));

    // A plain create answered 503 either never ran or is in the task list (and charged, below).
    const plainOpenings = await openingsOf(nats, "stall-plain");
    const answeredIds = plainDone.flatMap((answer) => (answer.status === 200 ? [answer.body.data?.task_id as number] : []));
    for (const id of answeredIds) expect(plainOpenings.has(id)).toBe(true);
    expect(plainOpenings.size).toBeLessThanOrEqual(CREATES);
    const listed = await fetch(`${edgeUrl}/api/compat/videosTasks?limit=100`, { headers: { authorization: plainAuthorization } });
    const tasks = ((await listed.json()) as { data: { tasks: Array<{ task_id: number }> } }).data.tasks;
    expect(new Set(tasks.map((task) => task.task_id))).toEqual(new Set(plainOpenings.keys()));

    // Every success charged exactly once at its price, every failure free; nobody ever below zero.
    const { finalTasks, problems } = await auditCharges(nats);
    expect(problems).toEqual([]);
    expect(finalTasks).toBe(plainOpenings.size + keyedOpenings.size);
    for (const account of ["stall-plain", "stall-keyed"]) {
      const history = await readAccountHistory(nats.js, nats.jsm, account);
      for (const { after } of history) expect(availableMicros(after)).toBeGreaterThanOrEqual(0);
      const succeeded = history.filter((entry) => entry.event.type === "ReservationSettled").length;
      expect((await ledger.current(account)).balanceMicros).toBe((CREATES - succeeded) * MINI_4S_MICROS);
    }
  }, 120_000);
});
