import type { OpenAiVideo } from "../../../contracts/openAiApi.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { NotFoundError } from "../../shared/errors.ts";

const PREFIX = "video_";

export const videoIdOf = (taskId: number): string => `${PREFIX}${taskId}`;

/** The task behind a video id; anything else is a video that does not exist (404, as OpenAI answers). */
export function taskIdOfVideoId(id: string): number {
  const digits = id.startsWith(PREFIX) ? id.slice(PREFIX.length) : "";
  const taskId = /^[1-9]\d{0,14}$/.test(digits) ? Number(digits) : Number.NaN;
  if (!Number.isSafeInteger(taskId)) throw new NotFoundError(`No video found with id '${id.slice(0, 100)}'.`, { param: "video_id", code: "video_not_found" });
  return taskId;
}

/** Seconds a typical generation takes: the estimate's scale while the upstream reports no progress. */
const TYPICAL_RUN_MS = 60_000;

/** Grows with time towards 95, never claiming done. */
const estimateAt = (createdAt: string, at: number): number =>
  Math.min(95, 5 + Math.floor(90 * (1 - Math.exp(-Math.max(0, at - Date.parse(createdAt)) / TYPICAL_RUN_MS))));

/**
 * Progress 0–100, never going down: 0 while queued, 100 when finished; while running the upstream's own
 * figure where it reports one, otherwise an estimate that grows with time. The estimate shown before the
 * upstream's first report stays the floor after it (max of the two), so switching never moves it back.
 */
export function estimatedProgress(view: Pick<TaskView, "status" | "createdAt" | "progress" | "progressSince">, now: number): number {
  switch (view.status) {
    case "pending":
      return 0;
    case "running":
      if (view.progress === undefined) return estimateAt(view.createdAt, now);
      return Math.max(view.progress, estimateAt(view.createdAt, Date.parse(view.progressSince ?? view.createdAt)));
    case "success":
    case "failed":
      return 100;
  }
}

const STATUS: Record<TaskView["status"], OpenAiVideo["status"]> = { pending: "queued", running: "in_progress", success: "completed", failed: "failed" };
const unix = (iso: string): number => Math.floor(Date.parse(iso) / 1000);

/** A task as the OpenAI Videos API shows it: the same task is visible through the spec's endpoints and these, to its own account only. */
export function videoObjectOf(view: TaskView, options: { now: number; retentionDays: number }): OpenAiVideo {
  const finished = view.finishedAt ?? (view.status === "success" || view.status === "failed" ? view.updatedAt : undefined);
  const width = view.width ?? 1280;
  const height = view.height ?? 720;
  return {
    id: videoIdOf(view.taskId),
    object: "video",
    status: STATUS[view.status],
    progress: estimatedProgress(view, options.now),
    model: view.model,
    prompt: view.prompt ?? null,
    seconds: String(view.durationSeconds ?? view.requestedSeconds ?? 0),
    size: `${width}x${height}`,
    created_at: unix(view.createdAt),
    completed_at: finished === undefined ? null : unix(finished),
    // The stored result is removed by the object store's max age, counted from when it was stored.
    expires_at: view.status === "success" && finished !== undefined ? unix(finished) + options.retentionDays * 86_400 : null,
    error: view.status === "failed" ? { code: "video_generation_failed", message: view.failureReason ?? "video generation failed" } : null,
    remixed_from_video_id: view.remixOf === undefined ? null : videoIdOf(view.remixOf),
  };
}
