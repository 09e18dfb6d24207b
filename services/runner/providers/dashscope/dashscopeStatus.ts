import type { ProviderStatus } from "../types.ts";
import { upstreamUsageOf, type VendorModel } from "../vendor/vendorModels.ts";
import { cancelledUpstream, failedUpstream, finishedWithoutVideo, lostUpstream, moderated, normalStatus, type UnknownStatus } from "../vendor/vendorOutcomes.ts";
import type { DashScopeTask } from "./dashscopeApi.ts";

/**
 * Every DashScope task status in our words (vendors doc C.3 and F). The failure's code and message are inside
 * `output`, not at the top level (the peer bug new-api has). `UNKNOWN` means DashScope no longer knows the id
 * (past its 24 h retention): the task is lost. DashScope bills seconds of video: `usage.duration` (input and
 * output seconds, for models that take a video) or `usage.video_duration`.
 */
export function dashScopeStatusOf(answer: DashScopeTask, model: VendorModel | undefined, id: string): ProviderStatus | UnknownStatus {
  const { output, usage } = answer;
  switch (normalStatus(output.task_status)) {
    case "pending":
      return { state: "queued" };
    case "running":
    case "suspended":
      return { state: "running" };
    case "succeeded": {
      if (!output.video_url) return finishedWithoutVideo(`${id}: SUCCEEDED without output.video_url`);
      const durationSeconds = usage?.output_video_duration ?? usage?.video_duration ?? undefined;
      const billedSeconds = usage?.duration ?? usage?.video_duration ?? undefined;
      return {
        state: "succeeded",
        result: { kind: "url", url: output.video_url },
        ...(durationSeconds ? { durationSeconds: Math.round(durationSeconds) } : {}),
        ...(billedSeconds !== undefined && model ? { upstreamUsage: upstreamUsageOf("seconds", billedSeconds, model) } : {}),
      };
    }
    case "failed": {
      const detail = `${id}: ${output.code ?? "no code"}: ${output.message ?? "no message"}`;
      return (output.code ?? "").startsWith("DataInspection") ? moderated(detail) : failedUpstream(output.message ?? undefined, detail);
    }
    case "canceled":
    case "cancelled":
      return cancelledUpstream(`${id}: CANCELED`);
    case "unknown":
      return lostUpstream(`${id}: UNKNOWN (expired or invalid task id)`);
    default:
      return { state: "unknown", status: output.task_status };
  }
}
