import type { ProviderStatus } from "../types.ts";
import { upstreamUsageOf, type VendorModel } from "../vendor/vendorModels.ts";
import { cancelledUpstream, expiredUpstream, failedUpstream, finishedWithoutVideo, moderated, normalStatus, type UnknownStatus } from "../vendor/vendorOutcomes.ts";
import { isModerationCode, resolutionOf, withoutRequestId, type ArkTask } from "./arkApi.ts";

/**
 * Every Ark status in our words (vendors doc, section F). Matched trimmed and case-insensitively; `pending`
 * and `processing`, which Ark does not emit but gateways in front of it do, are tolerated. Anything else is
 * `unknown`: it never ends a task (the adapter logs it and the runner asks again).
 */
export function arkStatusOf(task: ArkTask, model: VendorModel | undefined): ProviderStatus | UnknownStatus {
  switch (normalStatus(task.status)) {
    case "queued":
    case "pending":
      return { state: "queued" };
    case "running":
    case "processing":
      return { state: "running" };
    case "succeeded": {
      const url = task.content?.video_url;
      // Ark always sets the URL on success; without one there is nothing to deliver, so nothing to charge.
      if (!url) return finishedWithoutVideo(`${task.id}: succeeded without content.video_url`);
      const usageTokens = task.usage?.completion_tokens ?? task.usage?.total_tokens ?? undefined;
      const resolution = resolutionOf(task);
      const durationSeconds = task.duration ?? undefined;
      const reported = usageTokens !== undefined && usageTokens > 0;
      return {
        state: "succeeded",
        // The result URL is a pre-signed storage address: our key never goes with it.
        result: { kind: "url", url },
        ...(reported ? { usageTokens } : {}),
        ...(reported && model ? { upstreamUsage: upstreamUsageOf("tokens", usageTokens, model) } : {}),
        ...(resolution ? { resolution } : {}),
        ...(durationSeconds ? { durationSeconds } : {}),
      };
    }
    case "failed": {
      const code = task.error?.code ?? "no code";
      const detail = `${task.id}: ${code}: ${withoutRequestId(task.error?.message ?? "no message")}`;
      // Ark's messages name its codes and parameters: customers read ours.
      return isModerationCode(task.error?.code) ? moderated(detail) : failedUpstream(undefined, detail);
    }
    case "expired":
      return expiredUpstream(`${task.id}: expired`);
    case "cancelled":
    case "canceled":
      return cancelledUpstream(`${task.id}: cancelled`);
    default:
      return { state: "unknown", status: task.status };
  }
}
