import { normalStatus, failedUpstream, moderated, type UnknownStatus } from "../vendor/vendorOutcomes.ts";
import { isModerationCode, type MiniMaxTask } from "./minimaxApi.ts";

/** What the status answer says, before the file id is resolved to an address (a third call). */
export type MiniMaxProgress =
  | { state: "queued" }
  | { state: "running" }
  | { state: "finished"; fileId: string; resolution?: string }
  | ReturnType<typeof failedUpstream>
  | UnknownStatus;

/**
 * Every MiniMax task status in our words (vendors doc E2 and F): `Preparing` and `Queueing` are queued,
 * `Processing` running, `Success` carries a `file_id`, `Fail` ends it (1026/1027 in `base_resp`: the content
 * policy). Matched case-insensitively: MiniMax's own pages disagree on case.
 */
export function miniMaxProgressOf(task: MiniMaxTask, id: string): MiniMaxProgress {
  switch (normalStatus(task.status)) {
    case "preparing":
    case "queueing":
    case "queued":
      return { state: "queued" };
    case "processing":
      return { state: "running" };
    case "success": {
      if (!task.file_id) return failedUpstream(undefined, `${id}: Success without file_id`);
      const resolution = task.video_width && task.video_height ? `${task.video_width}*${task.video_height}` : undefined;
      return { state: "finished", fileId: task.file_id, ...(resolution ? { resolution } : {}) };
    }
    case "fail": {
      const code = task.base_resp?.status_code;
      const message = task.base_resp?.status_msg ?? undefined;
      const detail = `${id}: Fail: ${code ?? "no code"}: ${message ?? "no message"}`;
      if (isModerationCode(code)) return moderated(detail);
      // A Fail with `status_code` 0 says "success" in `status_msg`: no reason worth showing.
      return failedUpstream(code ? message : undefined, detail);
    }
    default:
      return { state: "unknown", status: task.status };
  }
}
