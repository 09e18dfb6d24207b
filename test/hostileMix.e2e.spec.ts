import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { killHard, startChildService, writeConfigFile, type ServiceChild } from "./helpers/childService.ts";
import { addInstantUpstream } from "./helpers/instantUpstream.ts";
import { testConfig } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";
import { expectReadyAgain } from "./helpers/readiness.ts";

/** Peak and current resident memory of a process, from /proc (Linux). */
function memoryOf(pid: number): { peakMiB: number; nowMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { peakMiB: kib("VmHWM") / 1024, nowMiB: kib("VmRSS") / 1024 };
}

/** Raw bytes on a fresh connection; resolves with whatever came back when the server closes or `ms` passes. */
const raw = (port: number, bytes: string, ms = 3000) =>
  new Promise<string>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(received);
    };
    const timer = setTimeout(done, ms);
    socket.on("data", (chunk) => (received += chunk.toString("latin1")));
    socket.on("end", done);
    socket.on("error", done);
    socket.write(bytes);
  });

/** Requests `0..count-1` pipelined on `connections` keep-alive connections (the last on each closes it). */
async function pipelined(port: number, count: number, connections: number, request: (i: number, close: boolean) => string): Promise<string[]> {
  const perConnection = Math.ceil(count / connections);
  return Promise.all(
    Array.from({ length: connections }, (_, c) => {
      const indexes = Array.from({ length: Math.min(perConnection, count - c * perConnection) }, (_, k) => c * perConnection + k);
      return raw(port, indexes.map((i, k) => request(i, k === indexes.length - 1)).join(""), 10_000);
    }),
  );
}

/** Runs `count` jobs, `width` at a time. */
async function inWaves(count: number, width: number, job: (i: number) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < count; start += width) {
    await Promise.all(Array.from({ length: Math.min(width, count - start) }, (_, k) => job(start + k)));
  }
}

/** Opens a connection, sends part of an upload, and resets it (the edge must neither hang on it nor log it as a failure). */
const abortedUpload = (port: number, head: string) =>
  new Promise<void>((resolve) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(head, () => setTimeout(() => socket.resetAndDestroy(), 5)));
    socket.on("close", () => resolve());
    socket.on("error", () => {});
  });

/**
 * One bounded hostile mix against a real `reelay serve` (edge, runner and projector in one process): the
 * attacks issue 8 found, thousands of requests. The process must stay up, healthy and under 640 MiB.
 */
describe("hostile mix", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  let child: ServiceChild;
  let port: number;
  let key: string;
  /** The child's log lines from the moment it was ready. */
  let log = "";
  let stopUpstream: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    server = await startTestNats();
    const config = testConfig();
    // An instant upstream instead of a render: this file is about the edge under attack.
    const instant = await addInstantUpstream(config);
    stopUpstream = () => instant.upstream.stop();
    nats = await connectNats(server.url, "hostile-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    child = await startChildService([], { NATS_URL: server.url, REELAY_CONFIG: writeConfigFile(config), ...instant.env });
    port = child.port ?? 0;
    child.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()));
    const ledger = new AccountLedger(nats);
    await ledger.execute("mallory", { type: "open" });
    await ledger.execute("mallory", { type: "credit", amountMicros: 100_000_000, creditId: "hostile" });
    key = (await new ApiKeyStore(nats.apiKeys).create("mallory")).key;
  });
  afterAll(async () => {
    if (child) await killHard(child);
    await nats?.nc.drain();
    await server?.stop();
    await stopUpstream?.();
  });

  it("stays up and under 640 MiB through thousands of hostile requests", async () => {
    const base = `http://127.0.0.1:${port}`;
    const created = await fetch(`${base}/api/compat/videosGenerations`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 }),
    });
    const taskId = ((await created.json()) as { data: { task_id: number } }).data.task_id;
    const countOf = (answers: string[], status: number) => answers.join("").split(`HTTP/1.1 ${status} `).length - 1;
    const closing = (close: boolean) => (close ? "Connection: close\r\n" : "");

    // Polling one's own task under thousands of distinct, long Host names (the reply cache was keyed by
    // them): half valid names (up to the 255 characters DNS allows), half 4 KB strings that are no host.
    const host = (i: number) => (i % 2 === 0 ? `h${i}-${"x".repeat(55)}.${"y".repeat(63)}.${"z".repeat(63)}.example` : `h${i}${"<".repeat(4000)}`);
    const polls = await pipelined(port, 2000, 20, (i, close) => `GET /api/compat/videosTask?id=${taskId} HTTP/1.1\r\nHost: ${host(i)}\r\nAuthorization: Bearer ${key}\r\n${closing(close)}\r\n`);
    expect(countOf(polls, 200)).toBe(2000);
    // Thousands of distinct invalid keys just under the header limit (every presented key was cached).
    const keys = await pipelined(port, 1000, 20, (i, close) => `GET /api/compat/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${String(i).padStart(8, "0")}${"k".repeat(15_000)}\r\n${closing(close)}\r\n`);
    expect(countOf(keys, 401)).toBe(1000);
    // Oversized headers, long targets, malformed requests, HTTP/1.0, pipelining, uploads cut off.
    await inWaves(100, 50, () => raw(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(40_000)}\r\n\r\n`));
    await inWaves(200, 50, () => raw(port, `GET /healthz?${"q".repeat(12_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    await inWaves(200, 50, (i) => raw(port, `${"\u0001".repeat(i % 7)}GARBAGE / HTTP/9.9\r\n\r\n`));
    await inWaves(200, 50, () => raw(port, "GET /healthz HTTP/1.0\r\n\r\n"));
    await inWaves(100, 25, () => raw(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(5) + "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    await inWaves(200, 50, (i) =>
      abortedUpload(port, `POST /api/compat/${i % 2 ? "videosGenerations" : "chat/completions"} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Length: 100000\r\n\r\n{"model":`),
    );
    // 24 concurrent echo streams of a message just under the body limit (each used to cost ~220 MiB).
    const big = "w ".repeat(500_000);
    await Promise.all(
      Array.from({ length: 24 }, async () => {
        const response = await fetch(`${base}/api/compat/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "echo", stream: true, messages: [{ role: "user", content: big }] }),
        });
        await response.arrayBuffer();
      }),
    );

    expect(child.exitCode).toBeNull();
    // Hostile input is the clients' problem, not an error of ours: nothing was logged at error level.
    expect(log.split("\n").filter((line) => line.includes('"level":50'))).toEqual([]);
    await expectReadyAgain(base);
    const memory = memoryOf(child.pid as number);
    // What it guards against is hundreds of MiB per echo stream (5 GiB for these 24). The process itself peaks at
    // about 340 MiB on Node 20 and 460 MiB on Node 24 run alone (2026-11-27: Node 24's heap grows before it
    // collects), 519 MiB on Node 24 inside the whole suite, where collection lags on two busy cores.
    expect(memory.peakMiB, `peak RSS ${memory.peakMiB.toFixed(0)} MiB`).toBeLessThan(640);
    if (process.env.SHOW_MEMORY) process.stdout.write(`hostile mix: peak RSS ${memory.peakMiB.toFixed(0)} MiB, now ${memory.nowMiB.toFixed(0)} MiB\n`);
  });
});
