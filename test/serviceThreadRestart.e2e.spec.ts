import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { killHard, startChildService, writeConfigFile, type ServiceChild } from "./helpers/childService.ts";
import { testConfig } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";

/**
 * `reelay serve` runs the runner and the projector on threads of their own. A thread whose start meets
 * passing NATS trouble (here: its connection refused once, as a restarting server under load would time
 * its requests out) ends with all it had started and a new one takes its place.
 */
describe("a service thread that cannot reach NATS at its start", () => {
  let server: Awaited<ReturnType<typeof startTestNats>> | undefined;
  let proxy: Server | undefined;
  let child: ServiceChild | undefined;
  const sockets = new Set<Socket>();

  afterAll(async () => {
    if (child) await killHard(child);
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
    await server?.stop();
  });

  it("is started again once NATS answers, and the process comes up", async () => {
    server = await startTestNats();
    const target = new URL(server.url);
    let connections = 0;
    // Between the child and nats-server: the second connection (the projector thread's first; the main
    // thread's is the first) is closed at once.
    proxy = createServer((client) => {
      connections++;
      sockets.add(client);
      if (connections === 2) return void client.destroy();
      const upstream = createConnection({ host: target.hostname, port: Number(target.port) });
      sockets.add(upstream);
      client.pipe(upstream).on("error", () => undefined);
      upstream.pipe(client).on("error", () => undefined);
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
    await new Promise<void>((resolve) => proxy?.listen(0, "127.0.0.1", resolve));
    const port = (proxy.address() as AddressInfo).port;

    child = await startChildService(["projector"], { NATS_URL: `nats://127.0.0.1:${port}`, REELAY_CONFIG: writeConfigFile(testConfig()) });
    expect(child.startupOutput).toMatch(/the projector thread could not start \(passing NATS trouble\); starting it again/);
    expect(connections).toBe(3);
  });
});
