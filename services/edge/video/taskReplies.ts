import { MICROS_PER_YUAN } from "../../../contracts/ledger.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { GenerationFailedError } from "../../shared/errors.ts";
import { jsonReply, type HttpReply } from "../http/reply.ts";
import type { CreatedTask } from "./createVideoTask.ts";

/** The spec's query answer for a task view; a failed task is an error (code 500, reason, no data). */
export function queryReply(view: TaskView, videoBaseUrl: string): HttpReply {
  switch (view.status) {
    case "pending":
    case "running":
      return jsonReply(200, {
        code: 200,
        msg: view.status,
        data: { task_id: view.taskId, status: view.status, ...(view.providerTaskId ? { provider_task_id: view.providerTaskId } : {}) },
      });
    case "success":
      return jsonReply(200, {
        code: 200,
        msg: "success",
        data: {
          task_id: view.taskId,
          status: "success",
          provider_task_id: view.providerTaskId,
          video_url: view.video ? `${videoBaseUrl}/videos/${encodeURIComponent(view.video.object)}` : undefined,
          duration: view.durationSeconds,
          resolution: view.resolution,
          total_tokens: view.totalTokens,
          cost: view.costMicros === undefined ? undefined : view.costMicros / MICROS_PER_YUAN,
        },
      });
    case "failed":
      throw new GenerationFailedError(view.failureReason ?? "video generation failed");
  }
}

export function createReply(task: CreatedTask): HttpReply {
  return jsonReply(200, {
    code: 200,
    msg: "success",
    data: { task_id: task.taskId, ...(task.providerTaskId ? { provider_task_id: task.providerTaskId } : {}), status: task.status },
  });
}

const REPLY_CACHE_LIMIT = 50_000;

/**
 * Polling clients ask the same question every few seconds and the answer changes only with the task's
 * version: keep the serialized reply per (task, version, base URL) instead of rebuilding it. Bounded.
 */
export class QueryReplyCache {
  private readonly replies = new Map<string, HttpReply>();

  reply(view: TaskView, videoBaseUrl: string): HttpReply {
    const key = `${view.taskId}:${view.version}:${videoBaseUrl}`;
    let reply = this.replies.get(key);
    if (reply === undefined) {
      reply = queryReply(view, videoBaseUrl);
      if (this.replies.size >= REPLY_CACHE_LIMIT) this.replies.clear();
      this.replies.set(key, reply);
    }
    return reply;
  }
}
