import { chromium } from "playwright-core";
import { CHROMIUM, FFMPEG, locateProgram } from "../../infra/binaries.ts";
import { locateNatsServer } from "../../infra/natsServerBinary.ts";
import { taskSubject, type TaskEvent } from "../../contracts/videoTask.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { reelayInProcess } from "../../test/helpers/cliInProcess.ts";
import { sampleJob } from "../../test/helpers/fixtures.ts";
import { startTestApp } from "../../test/helpers/testApp.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "console";
const TASKS = Number(process.env.BENCH_CONSOLE_TASKS ?? 100_000);
const IN_FLIGHT = 2_000;
const say = (line: string) => process.stderr.write(`[${SUITE}] ${line}\n`);

/**
 * The console's dashboard with 100,000 finished tasks in the store (issue 13: usable within 1 s on loopback).
 * Tasks are written straight into the task log (TaskSubmitted and GenerationSucceeded each: the read models
 * take a success without its start),
 * the projector catches up (views, index, counters), then Chromium signs in and the time until the dashboard
 * shows its numbers is measured, beside the admin API's own answers for the same pages.
 */
export async function consoleLoadBench(): Promise<BenchRow[]> {
  process.env.NATS_SERVER_BIN ??= locateNatsServer({ say }).path;
  process.env.FFMPEG_BIN ??= locateProgram(FFMPEG, say);
  const chromiumPath = locateProgram(CHROMIUM, say);
  const app = await startTestApp({ admin: true });
  try {
    const token = (await reelayInProcess(app, "admin", "tokens", "create", "--name", "bench")).stdout.trim().split("\n").at(-1) ?? "";
    say(`writing ${TASKS} tasks into the task log`);
    const seeded = performance.now();
    const at = new Date().toISOString();
    const video = { object: "bench.mp4", bytes: 1, contentType: "video/mp4" };
    const events = (taskId: number): TaskEvent[] => [
      { type: "TaskSubmitted", data: { account: `acct-${taskId % 50}`, job: sampleJob, ignoredFields: [], deadlineAt: at, clientReference: `reelay-task-${taskId}` }, meta: { schema: 1, taskId, version: 1, at } },
      { type: "GenerationSucceeded", data: { video, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 }, meta: { schema: 1, taskId, version: 2, at } },
    ];
    let pending: Array<Promise<unknown>> = [];
    for (let taskId = 1; taskId <= TASKS; taskId++) {
      pending.push(app.nats.js.publish("task-ids"));
      for (const event of events(taskId)) pending.push(app.nats.js.publish(taskSubject(taskId), JSON.stringify(event)));
      if (pending.length >= IN_FLIGHT) {
        await Promise.all(pending);
        pending = [];
      }
    }
    await Promise.all(pending);
    say(`written in ${((performance.now() - seeded) / 1000).toFixed(1)} s; waiting for the projector`);
    for (const durable of [CONSUMERS.taskViewProjector, CONSUMERS.taskIndex, CONSUMERS.taskStats]) {
      for (;;) {
        const info = await app.nats.jsm.consumers.info(STREAMS.tasks.name, durable);
        if (info.num_pending === 0 && info.num_ack_pending === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
    const caughtUpS = (performance.now() - seeded) / 1000;
    say(`caught up after ${caughtUpS.toFixed(1)} s`);

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
      { suite: SUITE, metric: `read models caught up with ${TASKS * 2} task events (views, index, counters, webhooks)`, value: (TASKS * 2) / caughtUpS, unit: "events/s" },
      { suite: SUITE, metric: "GET /admin/v1/stats", value: await best("/stats"), unit: "ms" },
      { suite: SUITE, metric: "GET /admin/v1/tasks?limit=50", value: await best("/tasks?limit=50"), unit: "ms" },
      { suite: SUITE, metric: "GET /admin/v1/usage?group_by=account", value: await best("/usage?group_by=account"), unit: "ms" },
    ];
  } finally {
    await app.stop();
  }
}
