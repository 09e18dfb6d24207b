import { execFile, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it, vi } from "vitest";
import { z } from "zod";

const run = promisify(execFile);
const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;
const STACK_FRAME = /\n\s+at /;
const dir = mkdtempSync(join(tmpdir(), "reelay-server-check-"));
/** The file nats-server writes with `--ports_file_dir` once it listens. */
const ServerPorts = z.object({ nats: z.tuple([z.string()]).rest(z.string()) });

async function reelay(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    const { stderr } = await run(process.execPath, [CLI, ...args], { env: { ...process.env, REELAY_DATA_DIR: join(dir, "data"), ...env } });
    return { code: 0, stderr };
  } catch (error) {
    const failed = error as { code?: unknown; stderr?: string };
    return { code: typeof failed.code === "number" ? failed.code : -1, stderr: failed.stderr ?? "" };
  }
}

/**
 * Speaks just enough of the NATS protocol to be connected to, reporting `version` in its INFO, and records
 * every protocol line it receives (so the test can see that nothing was published or subscribed).
 */
async function fakeNatsServer(version: string): Promise<{ url: string; received: string[]; server: Server }> {
  const received: string[] = [];
  const server = createServer((socket) => {
    socket.write(`INFO {"server_id":"FAKE","version":"${version}","proto":1,"max_payload":1048576,"headers":true,"jetstream":true}\r\n`);
    let buffered = "";
    socket.on("data", (chunk) => {
      buffered += chunk.toString();
      let end: number;
      while ((end = buffered.indexOf("\r\n")) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        received.push(line);
        if (line === "PING") socket.write("PONG\r\n");
      }
    });
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return { url: `nats://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`, received, server };
}

const children: ChildProcess[] = [];
const servers: Server[] = [];
afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  for (const server of servers) server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the server reelay connects to is checked before anything is written", () => {
  it("refuses an existing server (NATS_URL) older than 2.12, naming both versions, and publishes nothing", async () => {
    const fake = await fakeNatsServer("2.9.10");
    servers.push(fake.server);
    const result = await reelay({ NATS_URL: fake.url }, "accounts", "list");
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`NATS at ${fake.url} is nats-server 2.9.10; reelay needs 2.12.0 or newer`);
    expect(result.stderr).toMatch(/upgrade every node/);
    expect(result.stderr).not.toMatch(STACK_FRAME);
    expect(fake.received.some((line) => line.startsWith("CONNECT"))).toBe(true);
    expect(fake.received.filter((line) => /^(H?PUB|SUB) /.test(line))).toEqual([]);
  });

  it("refuses an existing server with JetStream turned off", async () => {
    // A port of the server's own choosing (-1), read from the file it writes once it listens: a port picked
    // here could be taken meanwhile by another test's server, which has JetStream.
    const portsDir = mkdtempSync(join(dir, "ports-"));
    const server = spawn(process.env.NATS_SERVER_BIN ?? "nats-server", ["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", portsDir], { stdio: "ignore" });
    children.push(server);
    const url = await vi.waitFor(() => ServerPorts.parse(JSON.parse(readFileSync(join(portsDir, readdirSync(portsDir)[0] ?? "none"), "utf8"))).nats[0], { timeout: 10_000 });
    await expect.poll(async () => (await reelay({ NATS_URL: url }, "accounts", "list")).stderr, { timeout: 10_000 }).toMatch(/JetStream turned off/);
    const result = await reelay({ NATS_URL: url }, "accounts", "list");
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/start the server with -js/);
  });

  it("refuses an existing server that takes messages smaller than 8 MB (nats-server's default is 1 MB): a create with an inline image answered 500", async () => {
    const portsDir = mkdtempSync(join(dir, "ports-"));
    const server = spawn(process.env.NATS_SERVER_BIN ?? "nats-server", ["-js", "-sd", mkdtempSync(join(dir, "store-")), "-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", portsDir], { stdio: "ignore" });
    children.push(server);
    const url = await vi.waitFor(() => ServerPorts.parse(JSON.parse(readFileSync(join(portsDir, readdirSync(portsDir)[0] ?? "none"), "utf8"))).nats[0], { timeout: 10_000 });
    await expect.poll(async () => (await reelay({ NATS_URL: url }, "accounts", "list")).stderr, { timeout: 10_000 }).toMatch(/takes messages of at most 1048576 bytes; reelay needs 8388608/);
    const result = await reelay({ NATS_URL: url }, "accounts", "list");
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/set max_payload: 8MB/);
    expect(result.stderr).not.toMatch(STACK_FRAME);
  });

  it("names a NATS_URL nothing answers at in one line, without a stack trace", async () => {
    // Port 1 (tcpmux), where nothing listens: a port closed here could be another test's server a moment later.
    const url = "nats://127.0.0.1:1";
    const result = await reelay({ NATS_URL: url }, "accounts", "list");
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split("\n").at(-1)).toBe(`reelay: cannot connect to NATS at ${url}: connection refused`);
    expect(result.stderr).not.toMatch(STACK_FRAME);
  });

  it("names a REELAY_DATA_DIR that is a file, or lies under one, in one line without a stack trace", async () => {
    const file = join(dir, "not-a-folder");
    writeFileSync(file, "x");
    const onFile = await reelay({ NATS_URL: "", REELAY_DATA_DIR: file }, "accounts", "list");
    expect(onFile.code).toBe(1);
    expect(onFile.stderr.trim()).toBe(`reelay: REELAY_DATA_DIR "${file}" cannot hold reelay's data: it is a file, not a folder`);
    const under = await reelay({ NATS_URL: "", REELAY_DATA_DIR: join(file, "data") }, "accounts", "list");
    expect(under.stderr.trim()).toBe(`reelay: REELAY_DATA_DIR "${join(file, "data")}" cannot hold reelay's data: a part of its path is a file, not a folder`);
  });

  it("with FFMPEG_BIN pointing at nothing, `reelay serve` stops in one line naming it (the runner thread's start failed)", async () => {
    const result = await reelay({ NATS_URL: "", FFMPEG_BIN: join(dir, "no-ffmpeg"), PORT: "0", REELAY_ADMIN_PORT: "off" }, "serve");
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split("\n").at(-1)).toBe(
      `reelay: the runner thread could not start: FFMPEG_BIN=${join(dir, "no-ffmpeg")} is not an executable file: point it at the ffmpeg binary, or unset it to use the ffmpeg on PATH`,
    );
    expect(result.stderr).not.toMatch(STACK_FRAME);
  });

  it("with NATS_SERVER_BIN pointing at 2.9, start-up refuses with the fix instead of using it", async () => {
    const old = join(dir, "nats-server-2.9");
    writeFileSync(old, '#!/bin/sh\necho "nats-server: v2.9.10"\n');
    chmodSync(old, 0o755);
    const result = await reelay({ NATS_SERVER_BIN: old, NATS_URL: "" }, "accounts", "list");
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`NATS_SERVER_BIN=${old} is nats-server 2.9.10; reelay needs 2.12.0 or newer`);
    expect(result.stderr).not.toMatch(STACK_FRAME);
  });
});
