import type { ProviderStatus } from "../types.ts";
import { isModerationCode, resolutionOf, withoutRequestId, type ArkTask } from "./arkApi.ts";

const NO_CHARGE = "no charge was made";

/**
 * Every Ark status in our words (vendors doc, section F). Matched trimmed and case-insensitively; `pending`
 * and `processing`, which Ark does not emit but gateways in front of it do, are tolerated. Anything else is
 * `unknown`: it never ends a task (the adapter logs it and the runner asks again).
 */
export function arkStatusOf(task: ArkTask, headers: Record<string, string>): ProviderStatus | { state: "unknown"; status: string } {
  const status = task.status.trim().toLowerCase();
  switch (status) {
    case "queued":
    case "pending":
      return { state: "queued" };
    case "running":
    case "processing":
      return { state: "running" };
    case "succeeded": {
      const url = task.content?.video_url;
      // Ark always sets the URL on success; without one there is nothing to deliver, so nothing to charge.
      if (!url) return { state: "failed", reason: `the upstream generator finished without a video; ${NO_CHARGE}`, detail: `${task.id}: succeeded without content.video_url` };
      const usageTokens = task.usage?.completion_tokens ?? task.usage?.total_tokens ?? undefined;
      const resolution = resolutionOf(task);
      const durationSeconds = task.duration ?? undefined;
      return {
        state: "succeeded",
        // The result URL is a pre-signed storage address: our key never goes with it.
        result: { kind: "url", url, headers },
        ...(usageTokens !== undefined && usageTokens > 0 ? { usageTokens } : {}),
        ...(resolution ? { resolution } : {}),
        ...(durationSeconds ? { durationSeconds } : {}),
      };
    }
    case "failed": {
      const code = task.error?.code ?? "no code";
      const message = withoutRequestId(task.error?.message ?? "no message");
      const detail = `${task.id}: ${code}: ${message}`;
      if (isModerationCode(task.error?.code)) {
        return { state: "failed", reason: `the generated video was blocked by the upstream's content policy; ${NO_CHARGE}`, detail };
      }
      return { state: "failed", reason: `video generation failed upstream; ${NO_CHARGE}`, detail };
    }
    case "expired":
      return { state: "failed", reason: `the upstream generator did not finish the video in its time limit (expired); ${NO_CHARGE}`, detail: `${task.id}: expired` };
    case "cancelled":
    case "canceled":
      return { state: "failed", reason: `the task was cancelled at the upstream generator; ${NO_CHARGE}`, detail: `${task.id}: cancelled` };
    default:
      return { state: "unknown", status: task.status };
  }
}
