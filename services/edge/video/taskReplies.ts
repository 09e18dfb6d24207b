import type { LRUCache } from "lru-cache";
import { lruOf } from "../../shared/lruOf.ts";
import type { z } from "zod";
import type { CreateAnswer, QueryAnswer } from "../../../contracts/videoApi.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { GenerationFailedError } from "../../shared/errors.ts";
import { taskDataObject } from "../../tasks/taskData.ts";
import { jsonReply, type HttpReply } from "../http/reply.ts";
import type { CreatedTask } from "./createTask.ts";

/** The spec's query answer for a task view; a failed task is an error (code 500, reason, no data). */
export function queryReply(view: TaskView, videoBaseUrl: string): HttpReply {
  if (view.status === "failed") throw new GenerationFailedError(view.failureReason ?? "video generation failed");
  const answer: z.input<typeof QueryAnswer> = { code: 200, msg: view.status, data: taskDataObject(view, videoBaseUrl) };
  return jsonReply(200, answer);
}

export function createReply(task: CreatedTask): HttpReply {
  const answer: z.input<typeof CreateAnswer> = {
    code: 200,
    msg: "success",
    data: { task_id: task.taskId, ...(task.providerTaskId ? { provider_task_id: task.providerTaskId } : {}), status: task.status },
  };
  return jsonReply(200, answer);
}

/** Replies kept; entries are small (a few hundred bytes: hosts are validated and short), so this bounds memory. */
const REPLY_CACHE_LIMIT = 20_000;

/**
 * Polling clients ask the same question every few seconds and the answer changes only with the task's
 * version: keep the serialized reply per (task, version, base URL) instead of rebuilding it. An LRU with a
 * fixed number of entries: clients naming many hosts only push older replies out.
 */
export class QueryReplyCache {
  private readonly replies: LRUCache<string, HttpReply>;

  constructor(limit = REPLY_CACHE_LIMIT) {
    this.replies = lruOf(limit);
  }

  reply(view: TaskView, videoBaseUrl: string): HttpReply {
    const key = `${view.taskId}:${view.version}:${videoBaseUrl}`;
    let reply = this.replies.get(key);
    if (reply === undefined) {
      reply = queryReply(view, videoBaseUrl);
      this.replies.set(key, reply);
    }
    return reply;
  }

  get size(): number {
    return this.replies.size;
  }
}
