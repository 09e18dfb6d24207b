/**
 * What fair intake costs (issue 35): `node --import tsx bench/tools/intakeCosts.ts [tasks] [maxWaitingTasks …]`
 * (defaults: 2,000 tasks; 2,000 then 200). For each bound, on a fresh nats-server: `reelay serve` (one runner)
 * against the instant upstream with `maxInFlight` 20, so most of a burst waits; a burst of `tasks` creates from
 * one account, 64 at a time, then one create of another account; then it waits until every task is final.
 * Prints nats-server's in+out messages for the whole run, the `runners` consumer's deliveries beyond one per
 * task (openings handed back and delivered again), and how long the second account's task took. A bound at
 * least the burst's size holds the whole burst (nothing is handed back): the difference between two runs,
 * divided by the extra deliveries, is what one handed-back opening costs (its delivery, its nak, its share of
 * fetches, and the log read of a task hosted after a hand-back).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { prepareAccounts } from "../lib/benchAccounts.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { varz, varzDelta } from "../lib/natsStats.ts";
import { startReelay } from "../lib/reelayChild.ts";
import { createConcurrently, videoCreator, watchFinals } from "../lib/taskLoad.ts";

const tasks = Number(process.argv[2] ?? 2000);
const bounds = process.argv.length > 3 ? process.argv.slice(3).map(Number) : [2000, 200];
const REQUEST = { model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4, generate_audio: false };

async function run(maxWaitingTasks: number): Promise<{ messages: number; extraDeliveries: number }> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-intake-costs-"));
  const server = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
  const instant = await instantVideoUpstream({ pollEveryMs: 20, maxInFlight: 20 });
  const { config } = instant;
  config.runner.maxWaitingTasks = maxWaitingTasks;
  // Creates answer at once rather than wait for a submit most of the burst only gets much later.
  config.limits.submitWaitMs = 100;
  const [big = "", small = ""] = await prepareAccounts(server.url, config, 2, "intake");
  const reelay = await startReelay({ natsUrl: server.url, config, workDir, env: instant.env });
  const nc = await connect({ servers: server.url });
  const jsm = await jetstreamManager(nc);
  const finals = await watchFinals(nc);
  const before = await varz(server.url);
  const started = performance.now();
  // Tasks final by each second since the burst began: where a slow end shows.
  const timeline: number[] = [];
  const sampler = setInterval(() => timeline.push(finals.succeeded), 1000);
  await createConcurrently(tasks, 64, videoCreator(reelay.baseUrl, [big], REQUEST));
  const smallAt = performance.now();
  const smallDone = finals.succeeded;
  await videoCreator(reelay.baseUrl, [small], REQUEST)();
  // The small task's end is the first final after it that the burst alone would not explain: watch its own query.
  let smallMs = Number.NaN;
  for (;;) {
    if (Number.isNaN(smallMs) && (await smallFinal(reelay.baseUrl, small))) smallMs = performance.now() - smallAt;
    if (finals.succeeded + finals.failed >= tasks + 1) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const elapsed = performance.now() - started;
  clearInterval(sampler);
  const delta = varzDelta(before, await varz(server.url));
  const consumer = await jsm.consumers.info(STREAMS.events.name, CONSUMERS.runners);
  const extraDeliveries = consumer.delivered.consumer_seq - (tasks + 1);
  const messages = delta.in_msgs + delta.out_msgs;
  process.stdout.write(
    `maxWaitingTasks ${maxWaitingTasks}: ${tasks} + 1 tasks in ${(elapsed / 1000).toFixed(1)} s, ${finals.failed} failed; ` +
      `${messages} NATS messages (${(messages / (tasks + 1)).toFixed(1)} per task); ${extraDeliveries} openings delivered again (handed back); ` +
      `the other account's task final after ${(smallMs / 1000).toFixed(2)} s (${tasks - smallDone} of the burst not final when it was created)\n` +
      `  final by each second: ${timeline.join(" ")}\n`,
  );
  finals.stop();
  await nc.close();
  await reelay.proc.stop(5000);
  await server.stop();
  await instant.upstream.stop();
  rmSync(workDir, { recursive: true, force: true });
  return { messages, extraDeliveries };
}

/** Whether the small account's only task (id unknown here: its list's first) is final. */
async function smallFinal(baseUrl: string, key: string): Promise<boolean> {
  const response = await fetch(`${baseUrl}/v1/videos?limit=1`, { headers: { authorization: `Bearer ${key}` } });
  if (!response.ok) return false;
  const body = (await response.json()) as { data?: Array<{ status?: string }> };
  const status = body.data?.[0]?.status;
  return status === "completed" || status === "failed";
}

const results = [];
for (const bound of bounds) results.push({ bound, ...(await run(bound)) });
const held = results.find((result) => result.extraDeliveries === 0);
for (const result of results) {
  if (!held || result === held) continue;
  const perHandBack = (result.messages - held.messages) / result.extraDeliveries;
  process.stdout.write(`maxWaitingTasks ${result.bound} against ${held.bound}: ${result.messages - held.messages} more messages, ${perHandBack.toFixed(2)} per opening handed back\n`);
}
