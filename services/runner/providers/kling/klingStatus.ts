import type { ProviderStatus } from "../types.ts";
import { upstreamUsageOf, type VendorModel } from "../vendor/vendorModels.ts";
import { failedUpstream, finishedWithoutVideo, normalStatus, type UnknownStatus } from "../vendor/vendorOutcomes.ts";
import type { KlingTask } from "./klingApi.ts";

/**
 * Every Kling task status in our words (vendors doc E1.3 and F): `submitted`, `processing`, `succeed` (not
 * "succeeded") with the video in `task_result.videos[0]`, and `failed`, whose reason is in `task_status_msg`
 * (the envelope's `message` says SUCCEED even then). Kling bills seconds of video: the video's `duration`.
 */
export function klingStatusOf(task: KlingTask, model: VendorModel | undefined): ProviderStatus | UnknownStatus {
  switch (normalStatus(task.task_status)) {
    case "submitted":
      return { state: "queued" };
    case "processing":
      return { state: "running" };
    case "succeed":
    case "succeeded": {
      const video = task.task_result?.videos?.[0];
      if (!video?.url) return finishedWithoutVideo(`${task.task_id}: succeed without task_result.videos[0].url`);
      const seconds = video.duration ?? undefined;
      return {
        state: "succeeded",
        result: { kind: "url", url: video.url },
        ...(seconds ? { durationSeconds: Math.round(seconds) } : {}),
        ...(seconds && model ? { upstreamUsage: upstreamUsageOf("seconds", seconds, model) } : {}),
      };
    }
    case "failed":
      return failedUpstream(task.task_status_msg ?? undefined, `${task.task_id}: failed: ${task.task_status_msg ?? "no message"}`);
    default:
      return { state: "unknown", status: task.task_status };
  }
}
