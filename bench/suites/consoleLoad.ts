import { chromium } from "playwright-core";
import { CHROMIUM, FFMPEG, locateProgram } from "../../infra/binaries.ts";
import { locateNatsServer } from "../../infra/natsServerBinary.ts";
import { dayKey, hourKey } from "../../contracts/taskStats.ts";
import type { TaskView } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { statsOf, type StatsChange, type TaskFacts } from "../../services/tasks/taskStats.ts";
import { evolveTaskView, taskViewKey } from "../../services/tasks/taskView.ts";
import { reelayInProcess } from "../../test/helpers/cliInProcess.ts";
import { startTestApp } from "../../test/helpers/testApp.ts";
import { finishedTaskMessages } from "../lib/seedTasks.ts";
import { counterIncrement } from "../../services/edge/video/taskIds.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "console";
const TASKS = Number(process.env.BENCH_CONSOLE_TASKS ?? 100_000);
const IN_FLIGHT = 2_000;
const say = (line: string) => process.stderr.write(`[${SUITE}] ${line}\n`);

/**
 * The console's dashboard with 100,000 finished tasks in the store (issue 13: usable within 1 s on loopback).
 * Each task is written into the task log (TaskSubmitted and GenerationSucceeded) and into the read models
 * the projector would keep for it (its view, the account index, the dashboard's counters, folded with the
 * projector's own functions); then Chromium signs in and the time until the dashboard shows its numbers is
 * measured, beside the admin API's own answers for the same pages.
 */

/** Sums one counter change into the documents the stats reactor would have written. */
function addChange(counters: Map<string, Record<string, unknown>>, change: StatsChange, seq: number): void {
  const key = change.doc === "status" ? "status" : change.doc === "hour" ? hourKey(change.at) : dayKey(change.at, change.account, change.model);
  const base: Record<string, unknown> =
    change.doc === "status"
      ? { pending: 0, running: 0, success: 0, failed: 0 }
      : change.doc === "hour"
        ? { hour: key.slice(5), created: 0, succeeded: 0, failed: 0, tokens: 0, chargedMicros: 0 }
        : { day: change.at.slice(0, 10), account: change.account, model: change.model, created: 0, succeeded: 0, failed: 0, tokens: 0, chargedMicros: 0 };
  const doc = counters.get(key) ?? base;
  for (const [field, by] of Object.entries(change.delta)) doc[field] = (doc[field] as number) + (by ?? 0);
  doc.seq = seq;
  counters.set(key, doc);
}

export async function consoleLoadBench(): Promise<BenchRow[]> {
  process.env.NATS_SERVER_BIN ??= locateNatsServer({ say }).path;
  process.env.FFMPEG_BIN ??= locateProgram(FFMPEG, say);
  const chromiumPath = locateProgram(CHROMIUM, say);
  // No projector: the read models are written here in bulk, as the projector would leave them (quicker than
  // folding 200,000 events, whose rate the catchup suite measures). No runner either: runners take new tasks
  // from the first events of the task log, so it would start on the 100,000 finished tasks written below
  // (rendering them with ffmpeg while the dashboard is timed: 3.1–3.3 s to a usable dashboard instead of 0.2).
  const app = await startTestApp({ admin: true, services: ["edge"] });
  try {
    const token = (await reelayInProcess(app, "admin", "tokens", "create", "--name", "bench")).stdout.trim().split("\n").at(-1) ?? "";
    say(`writing ${TASKS} tasks into the task log and the read models`);
    const seeded = performance.now();
    const at = new Date().toISOString();
    const counters = new Map<string, Record<string, unknown>>();
    let pending: Array<Promise<unknown>> = [];
    for (let taskId = 1; taskId <= TASKS; taskId++) {
      let view: TaskView | null = null;
      let facts: TaskFacts | undefined;
      for (const { subject, body, event } of finishedTaskMessages(taskId, `acct-${taskId % 50}`, Math.ceil(taskId / 50), at)) {
        pending.push(app.nats.js.publish(subject, body));
        view = evolveTaskView(view, event);
        const folded = statsOf(facts, event);
        facts = folded.facts;
        for (const change of folded.changes) addChange(counters, change, taskId);
      }
      if (view) {
        pending.push(app.nats.taskViews.put(taskViewKey(taskId), JSON.stringify(view)));
      }
      if (pending.length >= IN_FLIGHT) {
        await Promise.all(pending);
        pending = [];
      }
    }
    for (const [key, doc] of counters) pending.push(app.nats.taskStats.put(key, JSON.stringify(doc)));
    // The ids handed out, as edges would have counted them (the console's task list starts from the newest).
    pending.push(app.nats.js.publish(STREAMS.taskIdCounter.subjects[0], undefined, { headers: counterIncrement(TASKS) }));
    await Promise.all(pending);
    say(`written in ${((performance.now() - seeded) / 1000).toFixed(1)} s`);

    const timed = async (path: string) => {
      const started = performance.now();
      const answer = await fetch(`${app.adminUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
      await answer.arrayBuffer();
      return performance.now() - started;
    };
    const best = async (path: string) => Math.min(...(await Promise.all([0, 1, 2].map(() => timed(path)))));
    const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
    const page = await browser.newPage();
    await page.goto(`${new URL(app.adminUrl).origin}/console/`);
    await page.getByPlaceholder("rla_…").fill(token);
    const started = performance.now();
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByTestId("count-success").filter({ hasText: String(TASKS) }).waitFor({ timeout: 30_000 });
    const dashboardMs = performance.now() - started;
    const tasksStarted = performance.now();
    await page.goto(`${new URL(app.adminUrl).origin}/console/#/tasks`);
    await page.getByTestId(`task-${TASKS}`).waitFor({ timeout: 30_000 });
    const taskListMs = performance.now() - tasksStarted;
    await browser.close();
    return [
      { suite: SUITE, metric: `dashboard usable after sign-in, ${TASKS} tasks in the store (Chromium)`, value: dashboardMs, unit: "ms", target: "< 1000" },
      { suite: SUITE, metric: `task list page shown, ${TASKS} tasks (Chromium)`, value: taskListMs, unit: "ms" },
      { suite: SUITE, metric: "GET /admin/v1/stats", value: await best("/stats"), unit: "ms" },
      { suite: SUITE, metric: "GET /admin/v1/tasks?limit=50", value: await best("/tasks?limit=50"), unit: "ms" },
      { suite: SUITE, metric: "GET /admin/v1/usage?group_by=account", value: await best("/usage?group_by=account"), unit: "ms" },
    ];
  } finally {
    await app.stop();
  }
}
