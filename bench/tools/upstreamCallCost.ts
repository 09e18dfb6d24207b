/**
 * What one upstream API call costs in CPU, by how undici is asked: `node --import tsx bench/tools/upstreamCallCost.ts
 * [calls] [rounds]` (default 20,000 calls, 3 rounds; pin it with `taskset -c 1`). A node:http server in this
 * process answers a status call's JSON; 16 calls in flight. `request(url)` goes through undici's global Agent
 * (as the runner's calls did before 2026-11-27), with the task's AbortSignal and timeouts as the runner called,
 * and without; `callUpstream` is the runner's call now (services/runner/providers/httpAnswers.ts: a Pool per
 * origin, the same signal and timeouts); a bare Pool call is the least undici does. Prints µs of CPU per call
 * (client and server together) for each way, round by round.
 */
import { setMaxListeners } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool, request } from "undici";
import { callUpstream } from "../../services/runner/providers/httpAnswers.ts";

const calls = Number(process.argv[2] ?? 20_000);
const rounds = Number(process.argv[3] ?? 3);
const IN_FLIGHT = 16;
const TIMEOUT_MS = 30_000;
const ANSWER = JSON.stringify({ id: "video_1", object: "video", status: "completed", progress: 100 });
const PATH = "/v1/videos/video_1";
const headers = { authorization: "Bearer upstream-key", accept: "application/json" };

const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(ANSWER);
  });
});
await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const pool = new Pool(origin);
const { signal } = new AbortController();

const ways: Record<string, () => Promise<unknown>> = {
  "request(url), signal and timeouts": async () =>
    (await request(`${origin}${PATH}`, { method: "GET", headers, signal, headersTimeout: TIMEOUT_MS, bodyTimeout: TIMEOUT_MS })).body.text(),
  "request(url)": async () => (await request(`${origin}${PATH}`, { method: "GET", headers })).body.text(),
  "callUpstream (a pool per origin, signal and timeouts)": () =>
    callUpstream(`${origin}${PATH}`, { method: "GET", headers, body: null, signal, timeoutMs: TIMEOUT_MS, what: `GET ${PATH}` }),
  "a bare pool call": async () => (await pool.request({ path: PATH, method: "GET", headers })).body.text(),
};

async function callMany(call: () => Promise<unknown>, count: number): Promise<void> {
  let started = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (started++ < count) await call();
    }),
  );
}

// The signal is shared by every call in flight here (a task's by its one call at a time): no listener limit.
setMaxListeners(0, signal);
for (const call of Object.values(ways)) await callMany(call, calls / 4);
for (let round = 1; round <= rounds; round++) {
  for (const [way, call] of Object.entries(ways)) {
    const before = process.cpuUsage();
    await callMany(call, calls);
    const used = process.cpuUsage(before);
    process.stdout.write(`round ${round}: ${((used.user + used.system) / calls).toFixed(1).padStart(6)} µs of CPU per call  ${way}\n`);
  }
}
await pool.close();
server.close();
