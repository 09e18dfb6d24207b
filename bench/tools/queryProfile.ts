/**
 * Where an edge spends its CPU answering task queries: `node --import tsx bench/tools/queryProfile.ts [seconds] [env=value ...]`.
 * Starts nats-server and `reelay serve`, creates one task, then an edge-only `reelay serve edge` with a V8 CPU
 * profile (and the given environment, e.g. REELAY_METRICS=off), loads it with wrk (64 connections) and prints
 * the top functions by self time, and the share of each package. For the query and metrics-cost targets.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer } from "../../infra/natsServer.ts";
import { VideoClient } from "../../test/helpers/videoClient.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { runWrk } from "../lib/wrk.ts";
import { benchConfig } from "../suites/videoPath.ts";
import { summarizeProfile } from "./profileTop.ts";

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

const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"));
if (!file) throw new Error("no profile written");
process.stdout.write(`${run.rps.toFixed(0)} req/s\n`);
process.stdout.write(summarizeProfile(join(profileDir, file)));
rmSync(workDir, { recursive: true, force: true });
