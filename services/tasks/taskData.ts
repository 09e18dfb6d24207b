import { MICROS_PER_YUAN } from "../../contracts/ledger.ts";
import type { TaskData } from "../../contracts/videoApi.ts";
import type { TaskView } from "../../contracts/videoTask.ts";

/**
 * A task as customers see it: the `data` object of the query endpoint (and of webhooks and event
 * streams). A failed task has no `data` in the query's answer (it is an error there); elsewhere it is
 * `{task_id, status: "failed", msg}`.
 */
export function taskDataObject(view: TaskView, videoBaseUrl: string): TaskData {
  switch (view.status) {
    case "pending":
    case "running":
      return { task_id: view.taskId, status: view.status, ...(view.providerTaskId ? { provider_task_id: view.providerTaskId } : {}) };
    case "success":
      return {
        task_id: view.taskId,
        status: "success",
        provider_task_id: view.providerTaskId,
        video_url: view.video ? `${videoBaseUrl}/videos/${encodeURIComponent(view.video.object)}` : undefined,
        duration: view.durationSeconds,
        resolution: view.resolution,
        total_tokens: view.totalTokens,
        cost: view.costMicros === undefined ? undefined : view.costMicros / MICROS_PER_YUAN,
      };
    case "failed":
      return { task_id: view.taskId, status: "failed", msg: view.failureReason ?? "video generation failed" };
  }
}
