/**
 * Where an edge spends its CPU answering task queries: `node --import tsx bench/tools/queryProfile.ts [seconds] [env=value ...]`.
 * Starts nats-server and `reelay serve`, creates one task, then an edge-only `reelay serve edge` with a V8 CPU
 * profile (and the given environment, e.g. REELAY_METRICS=off), loads it with wrk (64 connections) and prints
 * the top functions by self time, and the share of each package. For the query and metrics-cost targets.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer } from "../../infra/natsServer.ts";
import { VideoClient } from "../../test/helpers/videoClient.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { runWrk } from "../lib/wrk.ts";
import { benchConfig } from "../suites/videoPath.ts";

const seconds = Number(process.argv[2] ?? 5);
const env = Object.fromEntries(process.argv.slice(3).map((pair) => pair.split("=", 2) as [string, string]));
const workDir = mkdtempSync(join(tmpdir(), "reelay-qprof-"));
const profileDir = join(workDir, "profiles");
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = benchConfig();
const key = await prepareAccount(nats.url, workDir, config);
const full = await startReelay({ natsUrl: nats.url, config, workDir });
const created = await new VideoClient(full.baseUrl, key).create({ model: "Bench-parked", prompt: "a fox", duration: 4 });
const taskId = created.body.data?.task_id;
process.env.BENCH_CPU_PROF_DIR = profileDir;
const edge = await startReelay({ natsUrl: nats.url, config, workDir, services: ["edge"], env, cpu: "0" });
delete process.env.BENCH_CPU_PROF_DIR;
const url = `${edge.baseUrl}/api/compat/videosTask?id=${taskId}`;
const headers = { Authorization: `Bearer ${key}` };
await runWrk({ url, workDir, name: "warm", cpu: "1", connections: 64, durationS: 1, headers });
const run = await runWrk({ url, workDir, name: "profile", cpu: "1", connections: 64, durationS: seconds, headers });
await edge.proc.stop(10_000);
await full.proc.stop(10_000);
await nats.stop();

interface ProfileNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }
const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"));
if (!file) throw new Error("no profile written");
const profile = JSON.parse(readFileSync(join(profileDir, file), "utf8")) as { nodes: ProfileNode[] };
const total = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
const byFunction = new Map<string, number>();
const byPackage = new Map<string, number>();
for (const node of profile.nodes) {
  const hits = node.hitCount ?? 0;
  const { functionName, url: source, lineNumber } = node.callFrame;
  const shortUrl = source.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*?\/(services|contracts|machines|infra)\//, "$1/");
  const name = `${functionName || "(anonymous)"} ${shortUrl}:${lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + hits);
  const pkg = source.includes("node_modules/") ? (source.split("node_modules/")[1] ?? "").split("/").slice(0, source.includes("@") ? 2 : 1).join("/") : source.startsWith("node:") ? "node:" + source.slice(5).split("/")[0] : source ? shortUrl.split("/").slice(0, 2).join("/") : functionName;
  byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + hits);
}
const percent = (hits: number) => `${((hits / total) * 100).toFixed(1)}%`;
process.stdout.write(`${run.rps.toFixed(0)} req/s; samples ${total}\n\n-- by package --\n`);
for (const [name, hits] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 25)) process.stdout.write(`${percent(hits)}\t${name}\n`);
process.stdout.write("\n-- by function (self) --\n");
for (const [name, hits] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 40)) process.stdout.write(`${percent(hits)}\t${name}\n`);
rmSync(workDir, { recursive: true, force: true });
