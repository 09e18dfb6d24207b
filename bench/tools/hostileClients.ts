/**
 * What clients that hold an edge's resources do to `reelay serve`: `node --import tsx bench/tools/hostileClients.ts <case> [n]`.
 * Starts nats-server and `reelay serve` with the shipped config, then:
 * - `stalled-readers [120]`: stores 20 videos of 20 MB (more than the edge keeps), then opens n connections that
 *   each ask for one of them and read nothing; prints reelay's resident memory every 10 of them.
 * - `held-bodies [100]`: n connections each send a 10.5 MB `POST /v1/videos` upload but its last byte, with a
 *   key no one has; then as many with a valid key. Prints reelay's resident memory and how many were answered.
 * - `idle-flood [1500]`: reelay under an open-file limit of 1,024; creates a task of the local model, then keeps n
 *   idle connections open (a closed one is opened again) for 40 s, and prints the task's state every 5 s.
 * - `unknown-keys [5]`: for n seconds each, 32 clients query a task with keys of another shape (`sk-…`), then
 *   with made-up keys of reelay's shape; prints requests per second and reelay's and nats-server's CPU per request.
 * - `forged-callbacks [5]`: reelay with an Ark channel that takes callbacks; for n seconds each, 32 clients post
 *   callbacks naming made-up tasks to a channel that takes none (404: warms the process up), to the Ark channel, then
 *   to the first again (the baseline); prints the same.
 * - `video-lookups [5]`: stores one small video; for n seconds each, 32 clients ask for made-up names that are not
 *   video names (404 without a lookup: warms the process up), for made-up video names, for the stored video's first
 *   bytes, then for made-up names that are not video names again (the baseline); prints the same.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect as tcp, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { Objm } from "@nats-io/obj";
import { connect } from "@nats-io/transport-node";
import { ProviderSettings } from "../../contracts/config.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { loadConfig } from "../../services/shared/config.ts";
import { varz, varzDelta } from "../lib/natsStats.ts";
import { programPid } from "../lib/procs.ts";
import { prepareAccount, startReelay, type ReelayChild } from "../lib/reelayChild.ts";

const [kind = "", count] = process.argv.slice(2);
const CASES: Record<string, { n: number; run: (reelay: ReelayChild, n: number) => Promise<void> }> = {
  "stalled-readers": { n: 120, run: stalledReaders },
  "held-bodies": { n: 100, run: heldBodies },
  "idle-flood": { n: 1500, run: idleFlood },
  "unknown-keys": { n: 5, run: unknownKeys },
  "forged-callbacks": { n: 5, run: forgedCallbacks },
  "video-lookups": { n: 5, run: videoLookups },
};
const chosen = CASES[kind];
if (!chosen) {
  process.stderr.write(`usage: hostileClients.ts <${Object.keys(CASES).join("|")}> [n]\n`);
  process.exit(2);
}
const workDir = mkdtempSync(join(tmpdir(), "reelay-hostile-"));
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = loadConfig();
if (kind === "forged-callbacks") config.providers["ark-hooks"] = ProviderSettings.parse({ kind: "ark", baseUrl: "https://ark.example/api/v3", apiKeyEnv: "ARK_API_KEY", publicCallbackUrl: "https://reelay.example" });
const key = await prepareAccount(nats.url, workDir, config);
const reelay = await startReelay({ natsUrl: nats.url, config, workDir, ...(kind === "idle-flood" ? { openFiles: 1024 } : {}), ...(kind === "forged-callbacks" ? { env: { ARK_API_KEY: "bench" } } : {}) });
const port = Number(new URL(reelay.baseUrl).port);
const sockets: Socket[] = [];
try {
  await chosen.run(reelay, Number(count ?? chosen.n));
} finally {
  for (const socket of sockets) socket.destroy();
  await reelay.proc.stop(10_000);
  await nats.stop();
  rmSync(workDir, { recursive: true, force: true });
}

function residentMb(): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${reelay.proc.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
}

/** A connection that sends `head` (and `body`) and then reads nothing (`stalled`), or only its answer; `answered` once one came. */
function holdOpen(head: string, body?: Buffer, stalled = true): { answered: () => boolean } {
  const socket = tcp(port, "127.0.0.1");
  let answered = false;
  socket.on("error", () => undefined);
  socket.once("data", () => (answered = true));
  if (stalled) socket.pause();
  socket.write(head);
  if (body) socket.write(body);
  sockets.push(socket);
  return { answered: () => answered };
}

async function stalledReaders(_: ReelayChild, readers: number): Promise<void> {
  const nc = await connect({ servers: nats.url });
  const videos = await new Objm(nc).open("videos");
  const names: string[] = [];
  for (let i = 0; i < 20; i++) {
    const name = `hostile${i}-${randomBytes(12).toString("hex")}.mp4`;
    await videos.putBlob({ name }, randomBytes(20 * 1024 * 1024));
    names.push(name);
  }
  await nc.close();
  process.stdout.write(`20 videos of 20 MB stored; reelay ${residentMb().toFixed(0)} MB\n`);
  for (let i = 1; i <= readers; i++) {
    holdOpen(`GET /videos/${names[i % names.length]} HTTP/1.1\r\nHost: x\r\n\r\n`);
    if (i % 10 === 0) {
      await pause(4000);
      process.stdout.write(`${i} stalled readers: reelay ${residentMb().toFixed(0)} MB\n`);
    }
  }
}

async function heldBodies(_: ReelayChild, connections: number): Promise<void> {
  const size = 10_500_000;
  const part = Buffer.from('--XX\r\nContent-Disposition: form-data; name="input_reference"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n');
  const allButLast = Buffer.concat([part, Buffer.alloc(size - 1 - part.length, 0x61)]);
  for (const [who, bearer] of [["an unknown key", `rly_${"A".repeat(32)}`], ["a valid key", key]] as const) {
    const held = [];
    for (let i = 1; i <= connections; i++) {
      held.push(holdOpen(`POST /v1/videos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${bearer}\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: ${size}\r\n\r\n`, allButLast, false));
      if (i % 20 === 0) await pause(1500);
    }
    await pause(3000);
    process.stdout.write(`${connections} uploads held back by ${who}: reelay ${residentMb().toFixed(0)} MB, ${held.filter((h) => h.answered()).length} answered\n`);
    for (const socket of sockets.splice(0)) socket.destroy();
    await pause(3000);
  }
}

async function idleFlood(child: ReelayChild, connections: number): Promise<void> {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const created = (await (await fetch(`${child.baseUrl}/api/compat/videosGenerations`, { method: "POST", headers, body: JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 }) })).json()) as { data?: { task_id?: number } };
  const id = created.data?.task_id;
  let flooding = true;
  const keepOne = (): void => {
    if (!flooding) return;
    const socket = tcp(port, "127.0.0.1");
    socket.on("error", () => undefined);
    socket.once("close", () => setTimeout(keepOne, 10));
    sockets.push(socket);
  };
  for (let i = 0; i < connections; i++) keepOne();
  for (let second = 5; second <= 40; second += 5) {
    await pause(5000);
    const status = await fetch(`${child.baseUrl}/api/compat/videosTask?id=${id}`, { headers, signal: AbortSignal.timeout(2000) }).then(
      async (answer) => ((await answer.json()) as { data?: { status?: string }; msg?: string }),
      (error: Error) => ({ msg: `(${error.name})`, data: undefined }),
    );
    process.stdout.write(`${second} s of ${connections} idle connections: task ${id} ${status.data?.status ?? "-"} (${status.msg ?? ""})\n`);
  }
  flooding = false;
}

/** CPU seconds a process has used (user + system; /proc's ticks are hundredths). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * 32 clients sending `request` for `seconds`; prints the rate, the answers, and reelay's and nats-server's CPU
 * and nats-server's messages per request.
 */
async function flood(what: string, seconds: number, request: () => Promise<Response>): Promise<void> {
  const natsPid = programPid(nats.pid, "nats-server");
  const varzBefore = await varz(nats.url);
  const [reelayBefore, natsBefore] = [cpuSeconds(reelay.proc.pid), cpuSeconds(natsPid)];
  const until = Date.now() + seconds * 1000;
  const statuses = new Map<number, number>();
  let requests = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (Date.now() < until) {
        const answer = await request();
        await answer.arrayBuffer();
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        requests++;
      }
    }),
  );
  const perRequest = (before: number, pid: number) => (((cpuSeconds(pid) - before) / requests) * 1e6).toFixed(0);
  const answers = [...statuses].map(([status, n]) => `${n} × ${status}`).join(", ");
  const messages = varzDelta(varzBefore, await varz(nats.url));
  process.stdout.write(
    `${what}: ${(requests / seconds).toFixed(0)} requests/s (${answers}); reelay ${perRequest(reelayBefore, reelay.proc.pid)} µs, nats-server ${perRequest(natsBefore, natsPid)} µs of CPU ` +
      `and ${((messages.in_msgs + messages.out_msgs) / requests).toFixed(2)} messages per request\n`,
  );
}

async function unknownKeys(child: ReelayChild, seconds: number): Promise<void> {
  const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const madeUp = () => Array.from(randomBytes(32), (byte) => letters[byte % 64]).join("");
  for (const [what, keyOf] of [["keys of another shape (sk-…)", () => `sk-${madeUp()}`], ["made-up keys of reelay's shape", () => `rly_${madeUp()}`]] as const) {
    await flood(what, seconds, () => fetch(`${child.baseUrl}/api/compat/videosTask?id=1`, { headers: { authorization: `Bearer ${keyOf()}` } }));
  }
}

/** Vendor callbacks nobody signs, each naming a made-up task: to a channel that takes none (404: warms up), to an Ark channel, then to the first again (the baseline). */
async function forgedCallbacks(child: ReelayChild, seconds: number): Promise<void> {
  for (const [what, channel] of [["callbacks to a channel that takes none (404)", "nothing-here"], ["forged callbacks to an Ark channel", "ark-hooks"], ["callbacks to a channel that takes none (404), again", "nothing-here"]] as const) {
    await flood(what, seconds, () => {
      const body = JSON.stringify({ id: `cgt-20261128${randomBytes(6).toString("hex")}`, status: "succeeded" });
      return fetch(`${child.baseUrl}/hooks/upstream/${channel}`, { method: "POST", headers: { "content-type": "application/json" }, body });
    });
  }
}

/** Requests for stored videos, which need no key: names of no video's shape, made-up video names, one real video's first bytes. */
async function videoLookups(child: ReelayChild, seconds: number): Promise<void> {
  const nc = await connect({ servers: nats.url });
  const stored = `v${randomBytes(24).toString("base64url")}.mp4`;
  await (await new Objm(nc).open("videos")).putBlob({ name: stored }, randomBytes(100_000));
  await nc.close();
  const madeUp = () => `v${randomBytes(24).toString("base64url")}.mp4`;
  const cases = [
    ["names of no video's shape (404, no lookup)", () => `${madeUp()}.txt`, {}],
    ["made-up video names", madeUp, {}],
    ["one stored video's first bytes (Range)", () => stored, { range: "bytes=0-1" }],
    ["names of no video's shape again", () => `${madeUp()}.txt`, {}],
  ] as const;
  for (const [what, nameOf, headers] of cases) await flood(what, seconds, () => fetch(`${child.baseUrl}/videos/${nameOf()}`, { headers }));
}
