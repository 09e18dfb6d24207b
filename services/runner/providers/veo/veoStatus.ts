import type { ProviderStatus } from "../types.ts";
import { failedUpstream, finishedWithoutVideo, moderated } from "../vendor/vendorOutcomes.ts";
import type { VeoOperation } from "./veoApi.ts";

/** What an operation says, before the runner is given where to fetch the video (with our key). */
export type VeoProgress = { state: "running" } | { state: "finished"; uri: string } | Extract<ProviderStatus, { state: "failed" }>;

/**
 * A Veo operation in our words (vendors doc D.1 and F): not `done` is running (Veo has no queued state we can
 * see); `done` with `error` failed; `done` with samples succeeded; `done` with only filtered media is the
 * content policy. `done` with neither is a finish without a video: nothing to deliver, nothing to charge.
 */
export function veoProgressOf(operation: VeoOperation): VeoProgress {
  if (!operation.done) return { state: "running" };
  if (operation.error) {
    const message = typeof operation.error === "string" ? operation.error : (operation.error.message ?? undefined);
    const code = typeof operation.error === "string" ? "no code" : String(operation.error.code ?? "no code");
    return failedUpstream(message, `${operation.name}: ${code}: ${message ?? "no message"}`);
  }
  const answer = operation.response?.generateVideoResponse;
  const uri = answer?.generatedSamples?.find((sample) => sample.video?.uri)?.video?.uri;
  if (uri) return { state: "finished", uri };
  if ((answer?.raiMediaFilteredCount ?? 0) > 0) return moderated(`${operation.name}: filtered: ${(answer?.raiMediaFilteredReasons ?? []).join("; ") || "no reason"}`);
  return finishedWithoutVideo(`${operation.name}: done without generatedSamples`);
}
