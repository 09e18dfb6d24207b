import { ChannelReport } from "./runnerControl.ts";
import { z } from "zod";
import { AccountName } from "./apiKey.ts";

/**
 * The admin API's bodies, queries and answers (`/admin/v1/…`): validated with these schemas, and the OpenAPI
 * 3.1 document at `/admin/v1/openapi.json` is generated from the same ones (services/admin/openApi.ts).
 */

/** Yuan as a decimal string, at most 6 decimals: money never passes through a float on its way in. */
export const YuanText = z
  // A number, or nothing, gets the same words as a malformed string: what to send instead.
  .string({ error: "must be yuan as a decimal string with at most 6 decimals, such as \"12.50\"" })
  .regex(/^\d{1,13}(\.\d{1,6})?$/, "must be yuan as a decimal string with at most 6 decimals, such as \"12.50\"")
  .describe("yuan as a decimal string with at most 6 decimals, such as \"12.50\"");

export const AdminError = z.object({ error: z.object({ message: z.string(), code: z.string() }) });

export const CreateAccountBody = z.strictObject({ name: AccountName });
export const CreditBody = z.strictObject({ amount: YuanText, note: z.string().max(200).optional() });
export const CreditLimitBody = z.strictObject({ limit: YuanText });

export const AccountSummary = z.object({
  name: z.string(),
  balance: z.string().describe("yuan"),
  reserved: z.string().describe("yuan"),
  available: z.string().describe("yuan: balance − reserved + credit limit"),
  credit_limit: z.string().describe("yuan the balance may go below zero"),
});

export const LedgerEntry = z.object({
  sequence: z.number().int().describe("the entry's position in the ledger (use as `before` for the next page)"),
  at: z.string(),
  type: z.string(),
  description: z.string(),
  balance: z.string().describe("yuan, after the entry"),
  actor: z.string().optional(),
});
export const LedgerPage = z.object({ entries: z.array(LedgerEntry), next_before: z.number().int().nullable() });
/** A page's size from the query string, refused in words that say what to send (not zod's "received NaN"). */
function pageLimit(max: number) {
  const words = `must be an integer from 1 to ${max}`;
  return z.coerce.number({ error: words }).int(words).min(1, words).max(max, words).default(50);
}
/** Where the next page starts: the `next_before` of the page before. */
const BEFORE_WORDS = "must be a positive integer: the next_before of the page before";
const PageBefore = z.coerce.number({ error: BEFORE_WORDS }).int(BEFORE_WORDS).positive(BEFORE_WORDS).optional();

export const LedgerQuery = z.object({ limit: pageLimit(500), before: PageBefore });

export const ApiKeySummary = z.object({ id: z.string(), account: z.string(), created_at: z.string() });
export const CreatedApiKey = ApiKeySummary.extend({ key: z.string().describe("shown only in this answer") });

export const TaskStatusName = z.enum(["pending", "running", "success", "failed"]);
export const TaskSummary = z.object({
  task_id: z.number().int(),
  account: z.string(),
  model: z.string(),
  status: TaskStatusName,
  created_at: z.string(),
  updated_at: z.string(),
  total_tokens: z.number().int().optional(),
  cost: z.string().optional().describe("yuan"),
  reason: z.string().optional(),
});
export const TaskQuery = z.object({
  account: AccountName.optional(),
  status: TaskStatusName.optional(),
  model: z.string().max(100).optional(),
  limit: pageLimit(200),
  before: PageBefore,
});
export const TaskPage = z.object({ tasks: z.array(TaskSummary), next_before: z.number().int().nullable() });
export const TimelineEntry = z.object({
  at: z.string(),
  version: z.number().int(),
  type: z.string(),
  description: z.string(),
  ledger: z.array(z.object({ type: z.string(), amount: z.string().describe("yuan") })),
});
export const TaskDetail = TaskSummary.extend({ provider_task_id: z.string().optional(), video_url: z.string().optional(), timeline: z.array(TimelineEntry) });

const DayText = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "a day is YYYY-MM-DD (UTC)");

export const UsageQuery = z.object({
  from: DayText.optional().describe("first day, UTC (default: 29 days before `to`)"),
  to: DayText.optional().describe("last day, UTC (default: today)"),
  group_by: z.enum(["account", "model", "day"]).default("account"),
});
export const UsageRow = z.object({
  key: z.string().describe("the account, model or day"),
  tasks_created: z.number().int(),
  tasks_succeeded: z.number().int(),
  tasks_failed: z.number().int(),
  tokens: z.number().int(),
  charged: z.string().describe("yuan"),
});
export const UsageAnswer = z.object({ from: z.string(), to: z.string(), group_by: z.string(), rows: z.array(UsageRow) });

export const StatsAnswer = z.object({
  tasks: z.object({ pending: z.number().int(), running: z.number().int(), success: z.number().int(), failed: z.number().int() }),
  hours: z.array(z.object({ hour: z.string(), created: z.number().int(), succeeded: z.number().int(), failed: z.number().int(), tokens: z.number().int(), charged: z.string() })),
});

/** Every channel's fleet-wide use, read from the shared state (services/shared/channelReports.ts). */
export const ChannelsAnswer = z.object({ channels: z.array(ChannelReport) });
