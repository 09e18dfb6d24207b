import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { availableMicros } from "../services/billing/account.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { killHard, startChildService, writeConfigFile } from "./helpers/childService.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const MINI_4S_MICROS = 2_007_900;
const mini = (prompt: string) => ({ model: "VideoModel-2.0-mini", prompt, duration: 4 });

function exited(child: ChildProcess): Promise<NodeJS.Signals | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.signalCode);
    child.once("exit", (_code, signal) => resolve(signal));
  });
}

describe("money under concurrency and crashes", () => {
  let app: TestApp;
  let configPath: string;
  const children: ChildProcess[] = [];
  /** The two edges every test uses (with one scripted runner), started once: a child's start is the costly part. */
  let ports: Array<number | undefined> = [];
  const child = async (services: string[], env: Record<string, string> = {}) => {
    const started = await startChildService(services, { NATS_URL: app.natsUrl, REELAY_CONFIG: configPath, ...env });
    children.push(started);
    return started;
  };

  beforeAll(async () => {
    // This process runs no service: edges, runners and projectors (where settlement runs) are child processes.
    app = await startTestApp({ services: [], tweak: (config) => (config.runner.leaseMs = 1500) });
    configPath = writeConfigFile(app.config);
    const [first, second] = await Promise.all([child(["edge"]), child(["edge"]), child(["scripted-runner"])]);
    ports = [first.port, second.port];
  });
  afterAll(async () => {
    await Promise.all(children.map(killHard));
    await app?.stop();
  });

  it("50 concurrent creates across two edge processes against a balance for 10 accept exactly 10", async () => {
    const key = await app.keyFor("contended", 0);
    await app.ledger.execute("contended", { type: "credit", amountMicros: 10 * MINI_4S_MICROS, creditId: "exactly-ten" });
    const clients = ports.map((port) => new VideoClient(`http://127.0.0.1:${port}`, key));

    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => clients[i % 2]?.create(mini(`race ${i}`))));
    const statuses = answers.map((answer) => answer?.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 403)).toHaveLength(40);
    for (const answer of answers) if (answer?.status === 403) expect(answer.body.msg).toMatch(/^insufficient balance/);

    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "contended");
    expect(history.filter((entry) => entry.event.type === "CostReserved")).toHaveLength(10);
    for (const entry of history) expect(availableMicros(entry.after)).toBeGreaterThanOrEqual(0);
  });

  const projectors: ChildProcess[] = [];
  for (const failpoint of ["settlement:before-append", "settlement:after-append"]) {
    it(`charges exactly once when the settling process is killed (${failpoint})`, async () => {
      // The settling process of a test before is ended: the doomed one must be the only projector.
      await Promise.all(projectors.splice(0).map(killHard));
      const doomed = await child(["projector"], { REELAY_FAILPOINTS: failpoint });
      const port = ports[0];
      const account = `crash-${failpoint.replace(/\W/g, "-")}`;
      const client = new VideoClient(`http://127.0.0.1:${port}`, await app.keyFor(account, 10));

      const created = await client.create(mini("settle me once"));
      expect(created.status).toBe(200);
      const taskId = created.body.data?.task_id as number;
      // The task runs to success; the projector dies by SIGKILL at the failpoint inside settlement.
      expect(await exited(doomed)).toBe("SIGKILL");
      projectors.push(await child(["projector"]));

      await expect
        .poll(async () => (await app.ledger.current(account)).reservedMicros, { timeout: 20_000 })
        .toBe(0);
      const history = await readAccountHistory(app.nats.js, app.nats.jsm, account);
      const settlements = history.filter((entry) => entry.event.type === "ReservationSettled");
      expect(settlements).toHaveLength(1);
      expect(settlements[0]?.event).toMatchObject({ data: { taskId, costMicros: MINI_4S_MICROS } });
      expect((await app.ledger.current(account)).balanceMicros).toBe(10_000_000 - MINI_4S_MICROS);
      expect((await client.waitForFinal(taskId)).body.data).toMatchObject({ status: "success", cost: 2.0079 });
    });
  }
});
