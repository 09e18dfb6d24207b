import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { AdminAction } from "../../../contracts/admin.ts";
import {
  AccountSummary,
  ApiKeySummary,
  ChannelsAnswer,
  CreateAccountBody,
  CreatedApiKey,
  CreditBody,
  CreditLimitBody,
  LedgerPage,
  LedgerQuery,
  TaskDetail,
  TaskPage,
  StatsAnswer,
  TaskQuery,
  UsageAnswer,
  UsageQuery,
  type TaskSummary,
  type UsageRow,
} from "../../../contracts/adminApi.ts";
import { DayUsage, HourStats, hourKey, StatusCounts } from "../../../contracts/taskStats.ts";
import { AccountName } from "../../../contracts/apiKey.ts";
import { AccountBalance, type LedgerEvent } from "../../../contracts/ledger.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { newestTaskId } from "../video/taskIds.ts";
import { availableMicros, type AccountState } from "../../billing/account.ts";
import type { AccountLedger } from "../../billing/accountLedger.ts";
import { describeLedgerEvent, readAccountHistory } from "../../billing/ledgerReader.ts";
import { creditCommand, parseCreditLimit } from "../../billing/credits.ts";
import { formatYuan, parseYuan } from "../../billing/pricing.ts";
import { ApiKeyStore } from "../../shared/apiKeys.ts";
import { gatherChannels } from "../../shared/channelReports.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import type { Nats } from "../../shared/nats.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { listAccountTasks } from "../../tasks/taskIndex.ts";
import type { TaskViewReader } from "../video/taskViewReader.ts";
import { endpoint, rawReply, type AdminEndpoint } from "./adminApi.ts";

/** A CSV field: quoted when it holds a comma, quote or line break (account and model names rarely do). */
const csvField = (value: string): string => (/[",\n\r]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value);

export interface AdminDeps {
  nats: Nats;
  ledger: AccountLedger;
  views: TaskViewReader;
  taskLog: TaskLog;
  /** Where task videos are served (the edge's public base). */
  videoBaseUrl: string;
}

/** A task list without an account filter walks task ids down from the newest: at most this many per page. */
const MAX_IDS_SCANNED = 5_000;
/** Task ids whose views the unfiltered task list reads at once. */
const SCAN_CHUNK = 64;

const summaryOf = (state: AccountState): z.infer<typeof AccountSummary> => ({
  name: state.account,
  balance: formatYuan(state.balanceMicros),
  reserved: formatYuan(state.reservedMicros),
  available: formatYuan(availableMicros(state)),
  credit_limit: formatYuan(state.creditLimitMicros),
});

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

const accountOf = (name: string | undefined): string => {
  const parsed = AccountName.safeParse(name);
  if (!parsed.success) throw new ValidationError(parsed.error.issues[0]?.message ?? "bad account name");
  return parsed.data;
};

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

/** Every endpoint of the admin API (usage, events and the console are the next to come). */
export function adminEndpoints(deps: AdminDeps): AdminEndpoint[] {
  const { nats, ledger } = deps;
  const keys = new ApiKeyStore(nats.apiKeys);
  /** Every change is an event with its actor: who credited whom stays in the log. */
  const record = async (action: Omit<AdminAction, "at">): Promise<void> => {
    const entry: AdminAction = { at: new Date().toISOString(), ...action };
    await nats.js.publish(`adminlog.${action.action}`, JSON.stringify(entry));
  };
  const existing = async (name: string): Promise<AccountState> => {
    const state = await ledger.current(accountOf(name));
    if (!state.exists) throw new NotFoundError(`no account named ${name}`);
    return state;
  };
  /** An operator names a task by id: its account is looked up first (customers' reads always name theirs). */
  const taskView = async (taskId: number): Promise<TaskView | undefined> => {
    const account = await deps.taskLog.accountOf(taskId);
    return account === undefined ? undefined : deps.views.get(account, taskId);
  };
  const accountTaskView = (account: string) => async (taskId: number) => deps.views.get(account, taskId);

  return [
    endpoint({
      method: "GET",
      path: "/accounts",
      summary: "Every account with its balance, reserved and available yuan",
      response: z.object({ accounts: z.array(AccountSummary) }),
      async handle() {
        const accounts: Array<z.infer<typeof AccountSummary>> = [];
        for await (const key of await nats.balances.keys()) {
          const entry = await nats.balances.get(key);
          if (entry?.operation !== "PUT") continue;
          const doc = AccountBalance.parse(entry.json());
          accounts.push({ name: doc.account, balance: formatYuan(doc.balanceMicros), reserved: formatYuan(doc.reservedMicros), available: formatYuan(availableMicros(doc)), credit_limit: formatYuan(doc.creditLimitMicros) });
        }
        return { accounts: accounts.sort((a, b) => a.name.localeCompare(b.name)) };
      },
    }),
    endpoint({
      method: "POST",
      path: "/accounts",
      summary: "Open an account (balance 0)",
      body: CreateAccountBody,
      response: AccountSummary,
      status: 201,
      async handle({ actor, body }) {
        const before = await ledger.current(body.name);
        if (before.exists) throw new ValidationError(`account ${body.name} already exists`);
        const state = await ledger.execute(body.name, { type: "open" });
        await record({ actor, action: "account.create", target: body.name });
        return summaryOf(state);
      },
    }),
    endpoint({
      method: "GET",
      path: "/accounts/{name}",
      summary: "One account's balance, reserved and available yuan",
      response: AccountSummary,
      handle: async ({ params }) => summaryOf(await existing(params.name ?? "")),
    }),
    endpoint({
      method: "POST",
      path: "/accounts/{name}/credit",
      summary: "Add prepaid balance (yuan as a decimal string, exact to the micro-yuan); an Idempotency-Key header makes a retry land once",
      body: CreditBody,
      response: AccountSummary,
      async handle({ actor, body, params, request }) {
        const account = (await existing(params.name ?? "")).account;
        let micros: number;
        try {
          micros = parseYuan(body.amount);
        } catch (error) {
          throw new ValidationError((error as Error).message);
        }
        if (micros <= 0) throw new ValidationError("amount must be more than 0");
        // With an Idempotency-Key a retried credit lands once and answers the account as it is.
        const command = creditCommand(account, micros, { idempotencyKey: request.header("idempotency-key") || undefined, note: body.note ?? "admin API credit", actor });
        const state = await ledger.execute(account, command);
        await record({ actor, action: "account.credit", target: account, detail: { amount: formatYuan(micros) } });
        return summaryOf(state);
      },
    }),
    endpoint({
      method: "POST",
      path: "/accounts/{name}/credit-limit",
      summary: "Set how far below zero the account's balance may go (yuan; 0, the default, allows no debt)",
      body: CreditLimitBody,
      response: AccountSummary,
      async handle({ actor, body, params }) {
        const account = (await existing(params.name ?? "")).account;
        let micros: number;
        try {
          micros = parseCreditLimit(body.limit);
        } catch (error) {
          throw new ValidationError((error as Error).message);
        }
        const state = await ledger.execute(account, { type: "setCreditLimit", limitMicros: micros, changeId: randomUUID(), actor });
        await record({ actor, action: "account.credit_limit", target: account, detail: { limit: formatYuan(micros) } });
        return summaryOf(state);
      },
    }),
    endpoint({
      method: "GET",
      path: "/accounts/{name}/ledger",
      summary: "An account's ledger, newest first, with the balance after each entry",
      query: LedgerQuery,
      response: LedgerPage,
      async handle({ params, query }) {
        const account = (await existing(params.name ?? "")).account;
        const history = (await readAccountHistory(nats.js, nats.jsm, account)).filter((entry) => query.before === undefined || entry.sequence < query.before).reverse();
        // Entries of one message (a group commit) share its sequence, the page cursor: a page ends between messages.
        let end = Math.min(query.limit, history.length);
        while (end < history.length && history[end]?.sequence === history[end - 1]?.sequence) end++;
        const page = history.slice(0, end);
        return {
          entries: page.map((entry) => ({
            sequence: entry.sequence,
            at: entry.event.meta.at,
            type: entry.event.type,
            description: describeLedgerEvent(entry.event, formatYuan),
            balance: formatYuan(entry.after.balanceMicros),
            ...(entry.event.type === "AccountCredited" && entry.event.data.actor ? { actor: entry.event.data.actor } : {}),
          })),
          next_before: history.length > page.length ? (page.at(-1)?.sequence ?? null) : null,
        };
      },
    }),
    endpoint({
      method: "GET",
      path: "/accounts/{name}/keys",
      summary: "An account's API keys (ids only: keys are never stored)",
      response: z.object({ keys: z.array(ApiKeySummary) }),
      async handle({ params }) {
        const account = (await existing(params.name ?? "")).account;
        return { keys: (await keys.list(account)).map((key) => ({ id: key.keyId, account: key.account, created_at: key.createdAt })) };
      },
    }),
    endpoint({
      method: "POST",
      path: "/accounts/{name}/keys",
      summary: "Create an API key for the account; the key is in this answer only",
      response: CreatedApiKey,
      status: 201,
      async handle({ actor, params }) {
        const account = (await existing(params.name ?? "")).account;
        const { key, keyId } = await keys.create(account);
        await record({ actor, action: "key.create", target: keyId, detail: { account } });
        return { id: keyId, account, created_at: new Date().toISOString(), key };
      },
    }),
    endpoint({
      method: "DELETE",
      path: "/keys/{id}",
      summary: "Revoke an API key (edges refuse it within seconds)",
      response: ApiKeySummary,
      async handle({ actor, params }) {
        const revoked = await keys.revoke(params.id ?? "");
        await record({ actor, action: "key.revoke", target: revoked.keyId, detail: { account: revoked.account } });
        return { id: revoked.keyId, account: revoked.account, created_at: revoked.createdAt };
      },
    }),
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
      summary: "Each runner's upstream channels: in rotation or cooling down, tasks in flight and waiting, recent errors",
      response: ChannelsAnswer,
      handle: async () => ({ runners: (await gatherChannels(nats)).map((report) => ({ runner: report.runner, channels: report.channels as Array<Record<string, unknown>> })) }),
    }),
  ];
}
