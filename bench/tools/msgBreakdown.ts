/**
 * Which NATS messages a create costs, by subject: `node --import tsx bench/tools/msgBreakdown.ts [model] [tasks] [settle-ms] [in-flight] [accounts] [warm]`
 * (defaults: the bench's parked model, 200 creates, 3 s; model `instant`: the instant suite's whole life, on the
 * fake OpenAI-compatible upstream finishing at the first status call). Starts nats-server and `reelay serve`, creates the
 * tasks at once, and counts what a `>` subscriber sees per subject pattern (ids folded to N) — publishes
 * and their deliveries to consumers — beside nats-server's in+out message counters. The subscriber's own
 * copies double the server counters; the per-subject counts are what to compare. For issue 7's hop count.
 * `warm` (any value): each account creates one task before the counting starts, as the bench's accounts have
 * (their ledgers, balances and counters are read once on first touch).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type Msg } from "@nats-io/transport-node";
import { startNatsServer } from "../../infra/natsServer.ts";
import { varz, varzDelta } from "../lib/natsStats.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import { benchConfig } from "../suites/videoPath.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { createConcurrently } from "../lib/taskLoad.ts";
import { prepareAccounts } from "../lib/benchAccounts.ts";

const model = process.argv[2] ?? "Bench-parked";
const tasks = Number(process.argv[3] ?? 200);
const settleMs = Number(process.argv[4] ?? 3000);
/** Creates in flight at once (default: all of them), as the instant suite's 64 to see its batch sizes. */
const inFlight = Number(process.argv[5] ?? tasks);
/** Accounts the creates come from, in turn (default 1). */
const accounts = Number(process.argv[6] ?? 1);
const workDir = mkdtempSync(join(tmpdir(), "reelay-msgs-"));
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const instant = model === "instant" ? await instantVideoUpstream({ pollEveryMs: 10, maxInFlight: 5000 }) : undefined;
const config = instant?.config ?? benchConfig();
const keys = accounts === 1 ? [await prepareAccount(nats.url, workDir, config)] : await prepareAccounts(nats.url, config, accounts, "tenant");
const reelay = await startReelay({ natsUrl: nats.url, config, workDir, ...(instant ? { env: instant.env } : {}) });
const nc = await connect({ servers: nats.url });
const counts = new Map<string, number>();
/** What a reply on an inbox is: a pull's status (heartbeat 100, expiry 408, …), a direct get's message, a publish's ack, or another answer. */
function replyKind(msg: Msg): string {
  const status = msg.headers?.code;
  if (status !== undefined && status !== 0) return `_INBOX status ${status}`;
  if (msg.headers?.get("Nats-Stream")) return "_INBOX direct get answer";
  try {
    const body: unknown = msg.json();
    if (typeof body === "object" && body !== null && "stream" in body && "seq" in body) return "_INBOX publish ack";
  } catch {
    // Not JSON: some other answer.
  }
  return "_INBOX other answers";
}
const pattern = (subject: string) =>
  subject.startsWith("$O.") ? subject.split(".").slice(0, 3).join(".") : subject.replace(/\d+/g, "N").replace(/_reelay\.edge\.[0-9a-f]+/, "_reelay.edge.X").split(".").slice(0, 5).join(".");
const subscription = nc.subscribe(">", {
  callback: (_error, msg) => {
    const key = msg.subject.startsWith("_INBOX") ? replyKind(msg) : pattern(msg.subject);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  },
});
const body = JSON.stringify({ model: instant ? "VideoModel-2.0-mini" : model, prompt: "a fox", duration: 4, ...(instant ? { generate_audio: false } : {}) });
const create = async (key: string | undefined) => {
  const response = await fetch(`${reelay.baseUrl}/api/compat/videosGenerations`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  });
  await response.text();
};
if (process.argv[7] !== undefined) await Promise.all(keys.map(create));
await new Promise((resolve) => setTimeout(resolve, process.argv[7] === undefined ? 500 : 1500));
counts.clear();
const before = await varz(nats.url);
let turn = 0;
await createConcurrently(tasks, inFlight, () => create(keys[turn++ % keys.length]));
await new Promise((resolve) => setTimeout(resolve, settleMs));
const delta = varzDelta(before, await varz(nats.url));
process.stdout.write(`per task: server in+out ${((delta.in_msgs + delta.out_msgs) / tasks).toFixed(1)} (with this subscriber's copies)\n`);
for (const [subject, count] of [...counts].sort((a, b) => b[1] - a[1])) process.stdout.write(`${(count / tasks).toFixed(2)}\t${subject}\n`);
subscription.unsubscribe();
await nc.close();
await reelay.proc.stop(5000);
await nats.stop();
await instant?.upstream.stop();
rmSync(workDir, { recursive: true, force: true });
