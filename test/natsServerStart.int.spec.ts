import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EmbeddedServerTakenError, embeddedNats, freeLoopbackPort, runningEmbeddedServer, startNatsServer, type RunningNatsServer } from "../infra/natsServer.ts";

/** A server already running (another test's, as far as the starts below know), and a folder for the rest. */
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

/**
 * Tests start their servers on free ports, five files at once: two may pick one port. The server that loses
 * the bind exits, but the winner's monitor answers on the same monitor port, and a start that took that answer
 * for its own server's handed out the other test's server (a freeze of its own dead process group then froze
 * nothing: adversarialMoney.chatHoldServerStall saw its "frozen" server answer).
 */
describe("starting nats-server on a port another server holds", () => {

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

/**
 * `reelay serve` records its embedded server's pid and ports beside the store; the record outlives a reelay
 * killed with -9, and pids are reused (32,768 of them on this machine), so a live pid alone named a dead server.
 */
describe("the record of a data dir's embedded server", () => {

  const dataDirWithRecord = (name: string, record: object): string => {
    const dataDir = join(dir, name);
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(join(dataDir, "nats-server.json"), JSON.stringify(record));
    return dataDir;
  };

  it("given a record whose pid is now another process's and whose ports answer nothing, then no server runs for the data dir, and one is started", async () => {
    const closed = await freeLoopbackPort();
    const dataDir = dataDirWithRecord("reused-pid", { pid: process.pid, url: `nats://127.0.0.1:${closed}`, monitorPort: closed + 1 });
    expect(await runningEmbeddedServer(dataDir)).toBeUndefined();
    const started = await embeddedNats(dataDir, () => {});
    try {
      expect(started.url).not.toBe(`nats://127.0.0.1:${closed}`);
      expect(await runningEmbeddedServer(dataDir)).toMatchObject({ url: started.url });
    } finally {
      await started.stop();
    }
  });

  it("given a record naming a live server that keeps another store, then no server runs for the data dir", async () => {
    const dataDir = dataDirWithRecord("other-store", { pid: foreign.pid, url: foreign.url, monitorPort: foreign.monitorPort });
    expect(await runningEmbeddedServer(dataDir)).toBeUndefined();
  });

  it("given a server another process started for the data dir, then a command joins it and a serve (owned) refuses it, naming NATS_URL", async () => {
    const dataDir = join(dir, "taken");
    const first = await embeddedNats(dataDir, () => {});
    try {
      const command = await embeddedNats(dataDir, () => {});
      expect(command.url).toBe(first.url);
      await command.stop();
      expect(await runningEmbeddedServer(dataDir)).toMatchObject({ url: first.url });
      await expect(embeddedNats(dataDir, () => {}, { owned: true })).rejects.toThrow(EmbeddedServerTakenError);
      await expect(embeddedNats(dataDir, () => {}, { owned: true })).rejects.toThrow(/NATS_URL/);
    } finally {
      await first.stop();
    }
    // Once nothing runs for the data dir, an owned start starts its own.
    const owned = await embeddedNats(dataDir, () => {}, { owned: true });
    await owned.stop();
  });

  it("given two starts at the same moment on a fresh data dir, then one server opens the store and both use it", async () => {
    const dataDir = join(dir, "together");
    const [a, b] = await Promise.all([embeddedNats(dataDir, () => {}), embeddedNats(dataDir, () => {})]);
    try {
      expect(a.url).toBe(b.url);
      expect(readFileSync(join(dataDir, "nats-server.log"), "utf8").match(/Starting nats-server/g)).toHaveLength(1);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(await runningEmbeddedServer(dataDir)).toBeUndefined();
    expect(existsSync(join(dataDir, "nats-server.lock"))).toBe(false);
  });

  it("given a start lock left by a process that died while starting, then a start takes it over", async () => {
    const dataDir = join(dir, "stale-lock");
    mkdirSync(dataDir, { recursive: true });
    const dead = spawnSync(process.execPath, ["-e", ""]).pid;
    writeFileSync(join(dataDir, "nats-server.lock"), String(dead));
    const started = await embeddedNats(dataDir, () => {});
    await started.stop();
  });

  it("given its record replaced by another server's, when a server stops, then that record stays (it is how the other is found)", async () => {
    const dataDir = join(dir, "replaced-record");
    const started = await embeddedNats(dataDir, () => {});
    const other = { pid: foreign.pid, url: foreign.url, monitorPort: foreign.monitorPort };
    writeFileSync(join(dataDir, "nats-server.json"), JSON.stringify(other));
    await started.stop();
    expect(JSON.parse(readFileSync(join(dataDir, "nats-server.json"), "utf8"))).toEqual(other);
  });

  it("given a record written before monitor ports were recorded, then its server is still found by the client port + 1", async () => {
    const dataDir = join(dir, "older-record");
    const started = await embeddedNats(dataDir, () => {});
    try {
      const { pid, url } = (await runningEmbeddedServer(dataDir)) ?? { pid: 0, url: "" };
      writeFileSync(join(dataDir, "nats-server.json"), JSON.stringify({ pid, url }));
      expect(await runningEmbeddedServer(dataDir)).toMatchObject({ url: started.url });
    } finally {
      await started.stop();
    }
  });
});
