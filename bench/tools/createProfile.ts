/**
 * Where `reelay serve` spends its CPU accepting creates: `node --import tsx bench/tools/createProfile.ts [seconds] [--no-profile] [--accounts N]`.
 * Starts nats-server and a profiled `reelay serve` (edge, runner and projector threads, both cores), posts
 * creates of the bench's parked model with wrk (64 connections) and prints each thread's profile top
 * (bench/tools/profileTop.ts), largest first. For issue 7's create-path target. `--accounts N`: the creates
 * come from N accounts' keys in turn, as the video suite's (one account's creates are one chain of guarded writes).
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer } from "../../infra/natsServer.ts";
import { prepareAccounts } from "../lib/benchAccounts.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { runWrk } from "../lib/wrk.ts";
import { benchConfig, createLoad, PARKED_MAX_IN_FLIGHT } from "../suites/videoPath.ts";
import { summarizeProfile } from "./profileTop.ts";

const seconds = Number(process.argv[2] ?? 5);
/** `--no-profile`: only the rate (a profile costs the process a third of its throughput). */
const profiling = !process.argv.includes("--no-profile");
const accountsAt = process.argv.indexOf("--accounts");
const accounts = accountsAt > 0 ? Number(process.argv[accountsAt + 1]) : 1;
const workDir = mkdtempSync(join(tmpdir(), "reelay-cprof-"));
const profileDir = join(workDir, "profiles");
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = benchConfig();
const key = await prepareAccount(nats.url, workDir, config);
const tenants = accounts > 1 ? (await prepareAccounts(nats.url, config, accounts, "tenant")).map((tenantKey) => `Bearer ${tenantKey}`) : undefined;
if (profiling) process.env.BENCH_CPU_PROF_DIR = profileDir;
const reelay = await startReelay({ natsUrl: nats.url, config, workDir });
delete process.env.BENCH_CPU_PROF_DIR;
const request = createLoad(reelay.baseUrl, workDir, tenants ?? [`Bearer ${key}`], "Bench-parked");
// Past the parked model's capacity every opening is handed back and delivered again: the profile would
// measure that churn instead of creates.
const run = await runWrk({ ...request, name: "create", durationS: seconds, maxResponses: PARKED_MAX_IN_FLIGHT - 1_000 });
await reelay.proc.stop(15_000);
await nats.stop();
process.stdout.write(`${(run.status200 / run.durationS).toFixed(0)} creates/s accepted\n`);
const files = (profiling ? readdirSync(profileDir) : [])
  .filter((name) => name.endsWith(".cpuprofile"))
  .map((name) => join(profileDir, name))
  .sort((a, b) => statSync(b).size - statSync(a).size);
for (const file of files) process.stdout.write(`\n=== ${file.split("/").at(-1)}\n${summarizeProfile(file, 25)}`);
// BENCH_KEEP_WORKDIR=1 keeps the profiles (and the store) for a closer look, as the bench suites do.
if (process.env.BENCH_KEEP_WORKDIR === "1") process.stdout.write(`\nkept: ${workDir}\n`);
else rmSync(workDir, { recursive: true, force: true });
