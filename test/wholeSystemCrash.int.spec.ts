import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { dayKey } from "../contracts/taskStats.ts";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { killHard, startChildService, writeConfigFile, type ServiceChild } from "./helpers/childService.ts";
import { testConfig } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/** What a 4 s VideoModel-2.0-mini task costs (its estimate: the scripted vendor reports no usage). */
const MINI_4S_MICROS = 2_007_900;
const TASKS = 12;

/**
 * The crash-safety claims on the create path as it is now (the edge writes each task's first event,
 * runners take tasks from the task log, settlement and the read models react to it): every process is
 * killed with SIGKILL while tasks are under way — runner, projector, edge — and nats-server too, restarted
 * on its store. No task is lost, none is run twice, and the money is exact.
 */
describe("every process killed with SIGKILL mid-work, and nats-server restarted on its store", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-whole-crash-"));
  const children: ChildProcess[] = [];
  let server: RunningNatsServer | undefined;
  let nats: Nats | undefined;
  afterAll(async () => {
    await Promise.all(children.map(killHard));
    await nats?.nc.close().catch(() => undefined);
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("loses no task, runs none twice and charges each exactly once", { timeout: 90_000 }, async () => {
    const store = join(dir, "store");
    server = await startNatsServer({ storeDir: store, say: () => {} });
    const natsPort = Number(new URL(server.url).port);
    const config = testConfig((c) => (c.runner.leaseMs = 1_500));
    const configPath = writeConfigFile(config);
    nats = await connectNats(server.url, "whole-crash-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    const ledger = new AccountLedger(nats);
    await ledger.execute("survivor", { type: "open" });
    await ledger.execute("survivor", { type: "credit", amountMicros: 100_000_000, creditId: "whole-crash" });
    const key = (await new ApiKeyStore(nats.apiKeys).create("survivor")).key;

    const start = async (services: string[], extra: Record<string, string> = {}): Promise<ServiceChild> => {
      for (let attempt = 1; ; attempt++) {
        try {
          const child = await startChildService(services, { NATS_URL: server?.url ?? "", REELAY_CONFIG: configPath, ...extra });
          children.push(child);
          return child;
        } catch (error) {
          // A child whose start meets a JetStream request timing out right after the server's restart, under
          // the whole suite's load, exits, unless it is a service thread (those start again by themselves: the
          // edge and the scripted runner are not); its supervisor starts it again, as here.
          if (attempt >= 3 || !/TimeoutError/.test(String(error))) throw error;
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        }
      }
    };
    // About a second per task at the scripted vendor (16 status calls, 50 ms apart).
    const [edge, projector, runner] = await Promise.all([start(["edge"]), start(["projector"]), start(["scripted-runner"], { SCRIPTED_STATUS_CALLS: "16" })]);
    const client = new VideoClient(`http://127.0.0.1:${edge.port}`, key);

    const ids: number[] = [];
    for (let i = 0; i < TASKS; i++) {
      const created = await client.create({ model: "VideoModel-2.0-mini", prompt: `survive ${i}`, duration: 4 });
      expect(created.status).toBe(200);
      ids.push(created.body.data?.task_id as number);
    }
    // Mid-work: the tasks are at the vendor, none finished yet.
    await Promise.all([runner, projector, edge].map(killHard));
    await server.kill("SIGKILL");
    server = await startNatsServer({ storeDir: store, say: () => {}, port: natsPort });

    const [newEdge] = await Promise.all([start(["edge"]), start(["projector"]), start(["scripted-runner"], { SCRIPTED_STATUS_CALLS: "16" })]);
    const after = new VideoClient(`http://127.0.0.1:${newEdge.port}`, key);

    const finals = await Promise.all(ids.map((id) => after.waitForFinal(id, 60_000, 200)));
    expect(finals.map((final) => final.body.data?.status)).toEqual(ids.map(() => "success"));
    const taskLog = new TaskLog(nats.js, nats.jsm);
    let createdAt = "";
    for (const id of ids) {
      const { events } = await taskLog.read("survivor", id);
      // One clean life each: submitted once, accepted upstream once, succeeded once, versions without gaps.
      expect(events.map((event) => event.type)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationStarted", "GenerationSucceeded"]);
      expect(events.map((event) => event.meta.version)).toEqual([1, 2, 3, 4]);
      createdAt = events[0]?.meta.at ?? createdAt;
    }
    await expect.poll(async () => (await ledger.current("survivor")).reservedMicros, { timeout: 20_000 }).toBe(0);
    const history = await readAccountHistory(nats.js, nats.jsm, "survivor");
    const settled = history.filter((entry) => entry.event.type === "ReservationSettled").map((entry) => ("taskId" in entry.event.data ? entry.event.data.taskId : 0));
    expect(settled.sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
    expect((await ledger.current("survivor")).balanceMicros).toBe(100_000_000 - TASKS * MINI_4S_MICROS);
    // The counters the projector writes behind (held up to 250 ms) lost nothing to its SIGKILL and counted
    // nothing twice when the unacknowledged events came again.
    const day = dayKey(createdAt, "survivor", "VideoModel-2.0-mini");
    await expect
      .poll(async () => (await nats?.taskStats.get(day))?.json(), { timeout: 10_000 })
      .toMatchObject({ created: TASKS, succeeded: TASKS, failed: 0, chargedMicros: TASKS * MINI_4S_MICROS });
  });
});
