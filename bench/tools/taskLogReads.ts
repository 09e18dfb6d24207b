/**
 * What a task's read costs in a busy store, by layout: `node --import tsx bench/tools/taskLogReads.ts [tasks] [reads]`
 * (defaults 20,000 tasks, 2,000 reads). Seeds stream EVENTS with `tasks` running tasks (opening, acceptance,
 * start), written interleaved as a busy store holds them, once in this layout (`acct.A.task.N.state` and
 * `.upstream`) and once in the one before 2026-11-27 (every later event on `acct.A.task.N`); then reads random
 * tasks one at a time, with: this layout's read (TaskLog: one multi_last direct get), the earlier layout's (two
 * literal last-message gets and two literal batches), and the alternative not taken (a last-message get and a
 * batch over the wildcard `acct.A.task.N.*`). Prints each one's p50/p99 in ms and the direct gets per read.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { taskOpeningSubject, type TaskEvent } from "../../contracts/videoTask.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { connectNats } from "../../services/shared/nats.ts";
import { SubjectLog } from "../../services/shared/subjectLog.ts";
import { TaskLog, taskEventCodec } from "../../services/shared/taskLog.ts";
import { sampleJob } from "../../test/helpers/fixtures.ts";

const tasks = Number(process.argv[2] ?? 20_000);
const reads = Number(process.argv[3] ?? 2_000);
const workDir = mkdtempSync(join(tmpdir(), "reelay-reads-"));
const server = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const nats = await connectNats(server.url, "task-log-reads", { replicas: 1, leaseMs: 30_000 });
const at = new Date().toISOString();
const event = (taskId: number, version: number, type: "TaskSubmitted" | "UpstreamAccepted" | "GenerationStarted", account: string): TaskEvent => {
  const meta = { schema: 1 as const, taskId, version, at };
  if (type === "TaskSubmitted") return { type, data: { account, job: sampleJob, ignoredFields: [], deadlineAt: at }, meta };
  if (type === "UpstreamAccepted") return { type, data: { providerTaskId: `p-${taskId}` }, meta };
  return { type, data: { accepted: { providerTaskId: `p-${taskId}` } }, meta };
};
// Interleaved as a busy store holds them: all openings, then all acceptances, then all starts, for both layouts.
const rounds: Array<Array<{ subject: string; body: string }>> = [[], [], []];
for (let taskId = 1; taskId <= tasks; taskId++) {
  for (const [layout, later] of [["now", (step: string) => `acct.now.task.${taskId}.${step}`], ["old", () => `acct.old.task.${taskId}`]] as const) {
    rounds[0]?.push({ subject: layout === "now" ? taskOpeningSubject(layout, taskId, 0) : `acct.old.money.task.${taskId}`, body: JSON.stringify({ task: event(taskId, 1, "TaskSubmitted", layout) }) });
    rounds[1]?.push({ subject: later("upstream"), body: JSON.stringify(event(taskId, 2, "UpstreamAccepted", layout)) });
    rounds[2]?.push({ subject: later("state"), body: JSON.stringify(event(taskId, 3, "GenerationStarted", layout)) });
  }
}
for (const round of rounds) {
  for (let i = 0; i < round.length; i += 1000) await Promise.all(round.slice(i, i + 1000).map(({ subject, body }) => nats.js.publish(subject, body)));
}
const watcher = await connect({ servers: server.url });
let gets = 0;
watcher.subscribe(`$JS.API.DIRECT.GET.${STREAMS.events.name}`, { callback: () => void gets++ });
watcher.subscribe(`$JS.API.DIRECT.GET.${STREAMS.events.name}.>`, { callback: () => void gets++ });
await watcher.flush();
const taskLog = new TaskLog(nats.js, nats.jsm);
const subjectLog = new SubjectLog(nats.js, nats.jsm, STREAMS.events.name, taskEventCodec);
const ways: Record<string, (taskId: number) => Promise<number>> = {
  "this layout (multi_last)": async (taskId) => (await taskLog.read("now", taskId)).events.length,
  "before 2026-11-27 (literal gets)": async (taskId) => {
    const [first, later] = await Promise.all([subjectLog.read(`acct.old.money.task.${taskId}`), subjectLog.read(`acct.old.task.${taskId}`)]);
    return first.events.length + later.events.length;
  },
  "wildcard batch (not taken)": async (taskId) => {
    const [first, later] = await Promise.all([subjectLog.read(taskOpeningSubject("now", taskId, 0)), subjectLog.read(`acct.now.task.${taskId}.*`)]);
    return first.events.length + later.events.length;
  },
};
for (const [name, read] of Object.entries(ways)) {
  const times: number[] = [];
  await watcher.flush();
  const getsBefore = gets;
  for (let i = 0; i < reads; i++) {
    const taskId = 1 + Math.floor(Math.random() * tasks);
    const started = performance.now();
    const events = await read(taskId);
    times.push(performance.now() - started);
    if (events !== 3) throw new Error(`${name}: task ${taskId} read ${events} events`);
  }
  await nats.nc.flush();
  await watcher.flush();
  times.sort((a, b) => a - b);
  const pick = (q: number) => (times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0).toFixed(3);
  process.stdout.write(`${name}: p50 ${pick(0.5)} ms, p99 ${pick(0.99)} ms, ${((gets - getsBefore) / reads).toFixed(2)} direct gets per read\n`);
}
await watcher.close();
await nats.nc.close();
await server.stop();
rmSync(workDir, { recursive: true, force: true });
