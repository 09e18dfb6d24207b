import { ValidationError } from "../../shared/errors.ts";

const TASK_ID = /^[1-9][0-9]{0,14}$/;

/** The `id` query parameter of the task endpoints, or a 400 naming the problem. */
export function parseTaskIdParam(query: string): number {
  const id = new URLSearchParams(query).get("id");
  if (id === null || id === "") throw new ValidationError("id is required: GET /api/compat/videosTask?id=<task_id>");
  if (!TASK_ID.test(id)) throw new ValidationError(`id must be a positive integer task id, got "${id.slice(0, 40)}"`);
  return Number(id);
}
