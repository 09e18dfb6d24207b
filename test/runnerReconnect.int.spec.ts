import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { startEdge } from "../services/edge/main.ts";
import { startProjector } from "../services/projector/main.ts";
import { startRunner } from "../services/runner/main.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats } from "../services/shared/nats.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { silentLog, testConfig } from "./helpers/testApp.ts";
import { readTask } from "./helpers/taskReads.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/**
 * A nats-server restart longer than the runners' lease, under a live runner: after the restart either the
 * runner's heartbeat reaches the server first (it keeps its jobs) or the server hands the held jobs out again
 * first (the runner adopts the newer delivery instead of starting a second actor). Which one comes first is a
 * race of milliseconds; either way the runner works on each task once and the upstream sees every task once.
 */
describe("a nats-server restart under a live runner", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-reconnect-"));
  let server: RunningNatsServer | undefined;
  const stops: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("works on every task once, whether its jobs are kept or delivered again", async () => {
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    const port = Number(new URL(server.url).port);
    // Shorter than a restart plus the client's reconnect wait (about 2 s): the jobs may be delivered again.
    const config = testConfig((c) => (c.runner.leaseMs = 1_000));
    const nats = await connectNats(server.url, "reconnect-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    stops.push(() => nats.nc.close());
    const vendor = new ScriptedVendor({ pollEveryMs: 50, pollMaxEveryMs: 50 });
    // About 5 s per task: long enough to span the restart and the reconnect.
    vendor.generation = { kind: "succeed", after: 100 };
    stops.push((await startProjector(nats, config, silentLog)).stop);
    stops.push((await startRunner(nats, config, silentLog, () => vendor)).stop);
    const edge = await startEdge(nats, config, silentLog, { host: "127.0.0.1", port: 0, publicUrl: undefined });
    stops.push(edge.stop);
    const ledger = new AccountLedger(nats);
    await ledger.execute("acme", { type: "open" });
    await ledger.execute("acme", { type: "credit", amountMicros: 100_000_000, creditId: "reconnect" });
    const client = new VideoClient(`http://127.0.0.1:${edge.port}`, (await new ApiKeyStore(nats.apiKeys).create("acme")).key);

    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push((await client.create({ model: "VideoModel-2.0-mini", prompt: `held ${i}`, duration: 4 })).body.data?.task_id as number);
    await server.stop();
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {}, port });

    // A task not final in time says what its log holds: an edge's view behind its log, or a task that stopped there.
    const finalOrTold = async (id: number) =>
      client.waitForFinal(id, 30_000, 100).catch(async (error: unknown) => {
        const { events } = await readTask(nats, id);
        const accepted = events.find((event) => event.type === "UpstreamAccepted");
        const asked = accepted?.type === "UpstreamAccepted" ? (vendor.statusCalls.get(accepted.data.providerTaskId) ?? 0) : 0;
        throw new Error(`${String(error)}; its log: ${events.map((event) => event.type).join(", ")}; the vendor was asked its status ${asked} times`);
      });
    const finals = await Promise.all(ids.map(finalOrTold));
    expect(finals.map((final) => final.body.data?.status)).toEqual(ids.map(() => "success"));
    expect(vendor.submits).toHaveLength(ids.length);
    // One actor per task polls it: status calls up to the generation's length, plus a few around the outage.
    for (const calls of vendor.statusCalls.values()) expect(calls).toBeLessThanOrEqual(105);
  });
});
