import { ValidationError } from "../../shared/errors.ts";

const STATUSES = ["pending", "running", "success", "failed"] as const;

/** `limit` (1–100, default 20), `before` (a task id) and `status` of the task list, or a 400 naming the parameter. */
export function parseListQuery(query: string): { limit: number; before?: number; status?: string } {
  const params = new URLSearchParams(query);
  const limitText = params.get("limit");
  const limit = limitText === null ? 20 : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new ValidationError(`limit must be an integer from 1 to 100, got "${String(limitText).slice(0, 20)}"`);
  const beforeText = params.get("before");
  if (beforeText !== null && !/^[1-9][0-9]{0,14}$/.test(beforeText)) throw new ValidationError(`before must be a task id, got "${beforeText.slice(0, 20)}"`);
  const status = params.get("status");
  if (status !== null && !(STATUSES as readonly string[]).includes(status)) throw new ValidationError(`status must be one of ${STATUSES.join(", ")}, got "${status.slice(0, 20)}"`);
  return { limit, ...(beforeText !== null ? { before: Number(beforeText) } : {}), ...(status !== null ? { status } : {}) };
}
