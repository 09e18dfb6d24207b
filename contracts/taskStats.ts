import { z } from "zod";

/**
 * The `task_stats` bucket: counters the admin dashboard and usage report read in a few gets, whatever the
 * number of tasks (services/tasks/taskStats.ts keeps them). Each document records the stream sequence of
 * the last task event applied to it, so a redelivered event is never counted twice.
 */
const Applied = { seq: z.number().int().nonnegative() };

/** `status`: tasks in each status right now. */
export const StatusCounts = z.object({ pending: z.number().int(), running: z.number().int(), success: z.number().int(), failed: z.number().int(), ...Applied });
export type StatusCounts = z.infer<typeof StatusCounts>;

const Outcomes = {
  created: z.number().int().nonnegative(),
  succeeded: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  tokens: z.number().int().nonnegative(),
  /** Charged for succeeded tasks, at each task's price (the ledger's arithmetic). */
  chargedMicros: z.number().int().nonnegative(),
};

/** `hour.<YYYYMMDDHH>` (UTC): tasks created, finished and charged in that hour. */
export const HourStats = z.object({ hour: z.string(), ...Outcomes, ...Applied });
export type HourStats = z.infer<typeof HourStats>;

/** `day.<YYYYMMDD>.<account>.<model, base64url>`: the same per day, account and model (the usage report). */
export const DayUsage = z.object({ day: z.string(), account: z.string(), model: z.string(), ...Outcomes, ...Applied });
export type DayUsage = z.infer<typeof DayUsage>;

export const hourKey = (at: string): string => `hour.${at.slice(0, 13).replace(/[-T:]/g, "")}`;
export const dayKey = (at: string, account: string, model: string): string => `day.${at.slice(0, 10).replace(/-/g, "")}.${account}.${Buffer.from(model).toString("base64url")}`;
