import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";
import { startEdge } from "../services/edge/main.ts";
import { connectNats } from "../services/shared/nats.ts";
import { silentLog, testConfig } from "./helpers/testApp.ts";

describe("a NATS outage", () => {
  const dir = mkdtempSync(join(tmpdir(), "reelay-outage-"));
  let server: RunningNatsServer | undefined;
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("turns /healthz to 503 while NATS is away and back to 200 when it returns", async () => {
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    const port = Number(new URL(server.url).port);
    const config = testConfig();
    const nats = await connectNats(server.url, "outage-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    cleanups.push(() => nats.nc.close());
    const edge = await startEdge(nats, config, silentLog, { host: "127.0.0.1", port: 0, publicUrl: undefined });
    cleanups.push(() => edge.stop());
    const health = async () => (await fetch(`http://127.0.0.1:${edge.port}/healthz`)).status;

    expect(await health()).toBe(200);
    await server.stop();
    await expect.poll(health, { timeout: 10_000 }).toBe(503);
    server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {}, port });
    await expect.poll(health, { timeout: 20_000 }).toBe(200);
  });
});
