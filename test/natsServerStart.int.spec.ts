import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";

/**
 * Tests start their servers on free ports, five files at once: two may pick one port. The server that loses
 * the bind exits, but the winner's monitor answers on the same monitor port, and a start that took that answer
 * for its own server's handed out the other test's server (a freeze of its own dead process group then froze
 * nothing: adversarialMoney.chatHoldServerStall saw its "frozen" server answer).
 */
describe("starting nats-server on a port another server holds", () => {
  let dir: string;
  let foreign: RunningNatsServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "reelay-server-start-"));
    foreign = await startNatsServer({ storeDir: join(dir, "foreign"), say: () => {} });
  });
  afterAll(async () => {
    await foreign?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("given a server on the port asked for, when another start asks for that port, then it fails naming the exit, and never hands out the other server", async () => {
    const port = Number(new URL(foreign.url).port);
    const started = startNatsServer({ storeDir: join(dir, "second"), say: () => {}, port });
    await expect(started).rejects.toThrow(/nats-server exited/);
  });

  it("given that refused start, then the server already there goes on answering", async () => {
    const nc = await connect({ servers: foreign.url });
    try {
      expect(nc.info?.server_name).toBe("reelay-1");
    } finally {
      await nc.close();
    }
  });
});
