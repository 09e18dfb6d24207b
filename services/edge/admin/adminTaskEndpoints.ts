import { z } from "zod";
import { ChannelsAnswer, StatsAnswer, TaskDetail, TaskPage, TaskQuery, UsageAnswer, UsageQuery, type TaskSummary, type UsageRow } from "../../../contracts/adminApi.ts";
import { DayUsage, HourStats, hourKey, StatusCounts } from "../../../contracts/taskStats.ts";
import type { LedgerEvent } from "../../../contracts/ledger.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { newestTaskId } from "../video/taskIds.ts";
import { describeLedgerEvent, readAccountHistory } from "../../billing/ledgerReader.ts";
import { formatYuan } from "../../billing/pricing.ts";
import { fleetChannelReports } from "../../shared/channelReports.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import { listAccountTasks } from "../../tasks/taskIndex.ts";
import { endpoint, rawReply, type AdminEndpoint } from "./adminApi.ts";
import type { AdminDeps } from "./adminDeps.ts";

/** A CSV field: quoted when it holds a comma, quote or line break (account and model names rarely do). */
const csvField = (value: string): string => (/[",\n\r]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value);

/** A task list without an account filter walks task ids down from the newest: at most this many per page. */
const MAX_IDS_SCANNED = 5_000;
/** Task ids whose views the unfiltered task list reads at once. */
const SCAN_CHUNK = 64;

function taskSummaryOf(view: TaskView): z.infer<typeof TaskSummary> {
  return {
    task_id: view.taskId,
    account: view.account,
    model: view.model,
    status: view.status,
    created_at: view.createdAt,
    updated_at: view.updatedAt,
    ...(view.totalTokens === undefined ? {} : { total_tokens: view.totalTokens }),
    ...(view.costMicros === undefined ? {} : { cost: formatYuan(view.costMicros) }),
    ...(view.failureReason === undefined ? {} : { reason: view.failureReason }),
  };
}

/** Money a ledger event moved, for a task's timeline. */
function ledgerEffect(event: LedgerEvent): { type: string; amount: string } {
  switch (event.type) {
    case "CostReserved":
      return { type: "reserved", amount: formatYuan(event.data.amountMicros) };
    case "ReservationSettled":
      return { type: "charged", amount: formatYuan(event.data.costMicros) };
    case "ReservationReleased":
      return { type: "released", amount: formatYuan(event.data.reservedMicros) };
    default:
      return { type: event.type, amount: "0.000000" };
  }
}

/** The admin API's tasks, dashboard numbers, usage and channels. */
export function taskEndpoints(deps: AdminDeps): AdminEndpoint[] {
  const { nats } = deps;
  /** An operator names a task by id: its account is looked up first (customers' reads always name theirs). */
  const taskView = async (taskId: number): Promise<TaskView | undefined> => {
    const account = await deps.taskLog.accountOf(taskId);
    return account === undefined ? undefined : deps.views.get(account, taskId);
  };
  const accountTaskView = (account: string) => async (taskId: number) => deps.views.get(account, taskId);

  return [
    endpoint({
      method: "GET",
      path: "/tasks",
      summary: "Tasks, newest first, filtered by account, status and model",
      query: TaskQuery,
      response: TaskPage,
      async handle({ query }) {
        const matches = (view: TaskView | undefined): view is TaskView =>
          view !== undefined && (query.status === undefined || view.status === query.status) && (query.model === undefined || view.model === query.model) && (query.account === undefined || view.account === query.account);
        const tasks: Array<z.infer<typeof TaskSummary>> = [];
        if (query.account !== undefined) {
          // The account's own index: only its tasks are read.
          const { views, more } = await listAccountTasks(nats.jsm, query.account, { limit: query.limit, ...(query.before === undefined ? {} : { before: query.before }), matches }, accountTaskView(query.account));
          return { tasks: views.map(taskSummaryOf), next_before: more ? (views.at(-1)?.taskId ?? null) : null };
        }
        const newest = await newestTaskId(nats.jsm);
        let id = Math.min(query.before === undefined ? newest : query.before - 1, newest);
        const lowest = Math.max(1, id - MAX_IDS_SCANNED + 1);
        // Ids in chunks read in parallel: a view not in the edge's memory is a round trip, and one after the
        // other they added up to seconds on a busy edge.
        let lastIncluded: number | undefined;
        scan: while (id >= lowest) {
          const chunk = Array.from({ length: Math.min(SCAN_CHUNK, id - lowest + 1) }, (_, index) => id - index);
          for (const [index, view] of (await Promise.all(chunk.map(taskView))).entries()) {
            if (!matches(view)) continue;
            tasks.push(taskSummaryOf(view));
            if (tasks.length === query.limit) {
              lastIncluded = chunk[index];
              break scan;
            }
          }
          id -= chunk.length;
        }
        return { tasks, next_before: lastIncluded ?? (id >= 1 ? id + 1 : null) };
      },
    }),
    endpoint({
      method: "GET",
      path: "/tasks/{id}",
      summary: "One task: its view and its event timeline with the ledger effects",
      response: TaskDetail,
      async handle({ params }) {
        const taskId = Number(params.id);
        if (!Number.isSafeInteger(taskId) || taskId <= 0) throw new ValidationError(`task id must be a positive integer, got "${String(params.id).slice(0, 20)}"`);
        const view = await taskView(taskId);
        if (!view) throw new NotFoundError(`no task ${taskId}`);
        const { events } = await deps.taskLog.read(view.account, taskId);
        const ledgerEntries = (await readAccountHistory(nats.js, nats.jsm, view.account)).filter((entry) => "taskId" in entry.event.data && entry.event.data.taskId === taskId);
        const timeline = [
          ...events.map((event) => ({ at: event.meta.at, version: event.meta.version, type: event.type, description: JSON.stringify(event.data).slice(0, 500), ledger: [] as Array<{ type: string; amount: string }> })),
          ...ledgerEntries.map((entry) => ({ at: entry.event.meta.at, version: 0, type: `ledger:${entry.event.type}`, description: describeLedgerEvent(entry.event, formatYuan), ledger: [ledgerEffect(entry.event)] })),
        ].sort((a, b) => a.at.localeCompare(b.at) || a.version - b.version);
        return {
          ...taskSummaryOf(view),
          ...(view.providerTaskId === undefined ? {} : { provider_task_id: view.providerTaskId }),
          ...(view.video ? { video_url: `${deps.videoBaseUrl}/videos/${encodeURIComponent(view.video.object)}` } : {}),
          timeline,
        };
      },
    }),
    endpoint({
      method: "GET",
      path: "/stats",
      summary: "The dashboard's numbers: tasks in each status now, and tasks and spend per hour over the last 24 hours (counters, not scans)",
      response: StatsAnswer,
      async handle() {
        const counts = await nats.taskStats.get("status");
        const tasks = counts?.operation === "PUT" ? StatusCounts.parse(counts.json()) : { pending: 0, running: 0, success: 0, failed: 0 };
        const now = Date.now();
        const hours = await Promise.all(
          Array.from({ length: 24 }, async (_, i) => {
            const start = new Date(Math.floor(now / 3_600_000) * 3_600_000 - (23 - i) * 3_600_000).toISOString();
            const entry = await nats.taskStats.get(hourKey(start));
            const doc = entry?.operation === "PUT" ? HourStats.parse(entry.json()) : undefined;
            return { hour: start, created: doc?.created ?? 0, succeeded: doc?.succeeded ?? 0, failed: doc?.failed ?? 0, tokens: doc?.tokens ?? 0, charged: formatYuan(doc?.chargedMicros ?? 0) };
          }),
        );
        return { tasks: { pending: tasks.pending, running: tasks.running, success: tasks.success, failed: tasks.failed }, hours };
      },
    }),
    endpoint({
      method: "GET",
      path: "/usage",
      summary: "Tokens, charged yuan and tasks by outcome per account, model or day (UTC); CSV with Accept: text/csv",
      query: UsageQuery,
      response: UsageAnswer,
      async handle({ query, request }) {
        const to = query.to ?? new Date().toISOString().slice(0, 10);
        const from = query.from ?? new Date(Date.parse(to) - 29 * 86_400_000).toISOString().slice(0, 10);
        if (from > to) throw new ValidationError(`from (${from}) is after to (${to})`);
        const [first, last] = [from.replace(/-/g, ""), to.replace(/-/g, "")];
        const rows = new Map<string, z.infer<typeof UsageRow> & { micros: number }>();
        for await (const key of await nats.taskStats.keys("day.>")) {
          const day = key.split(".")[1] ?? "";
          if (day < first || day > last) continue;
          const entry = await nats.taskStats.get(key);
          if (entry?.operation !== "PUT") continue;
          const doc = DayUsage.parse(entry.json());
          const group = query.group_by === "account" ? doc.account : query.group_by === "model" ? doc.model : doc.day;
          const row = rows.get(group) ?? { key: group, tasks_created: 0, tasks_succeeded: 0, tasks_failed: 0, tokens: 0, charged: "", micros: 0 };
          row.tasks_created += doc.created;
          row.tasks_succeeded += doc.succeeded;
          row.tasks_failed += doc.failed;
          row.tokens += doc.tokens;
          row.micros += doc.chargedMicros;
          rows.set(group, row);
        }
        const sorted = [...rows.values()].sort((a, b) => a.key.localeCompare(b.key)).map(({ micros, ...row }) => ({ ...row, charged: formatYuan(micros) }));
        if (/text\/csv/i.test(request.header("accept"))) {
          const lines = [[query.group_by, "tasks_created", "tasks_succeeded", "tasks_failed", "tokens", "charged_yuan"].join(",")];
          for (const row of sorted) lines.push([csvField(row.key), row.tasks_created, row.tasks_succeeded, row.tasks_failed, row.tokens, row.charged].join(","));
          return rawReply({ status: 200, headers: { "content-type": "text/csv; charset=utf-8", "content-disposition": `attachment; filename="usage-${from}-${to}-by-${query.group_by}.csv"` }, body: `${lines.join("\n")}\n` });
        }
        return { from, to, group_by: query.group_by, rows: sorted };
      },
    }),
    endpoint({
      method: "GET",
      path: "/channels",
      summary: "Each upstream channel's fleet-wide use: in rotation or cooling down, tasks in flight and waiting per account, submit rate, recent errors",
      response: ChannelsAnswer,
      handle: async () => ({ channels: await fleetChannelReports(nats) }),
    }),
  ];
}
