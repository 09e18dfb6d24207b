import { z } from "zod";
import type { VideoJobSpec } from "../../../../contracts/videoTask.ts";
import { ProviderRejected } from "../types.ts";
import { classOfHttpStatus, type VendorErrorReading } from "../vendor/vendorApi.ts";
import { lenientInt } from "../vendor/lenientNumbers.ts";
import type { VendorModel } from "../vendor/vendorModels.ts";

/**
 * MiniMax Hailuo's video API (vendors doc, section E2): errors usually come as HTTP 200 with a non-zero
 * `base_resp.status_code`, so every answer's `base_resp` is read before anything else in it.
 */

const BaseResp = z.looseObject({ status_code: lenientInt, status_msg: z.string().nullish() });

export const MiniMaxCreated = z.looseObject({ task_id: z.string().min(1), base_resp: BaseResp.nullish() });

export const MiniMaxTask = z.looseObject({
  task_id: z.string().nullish(),
  status: z.string(),
  file_id: z.string().nullish(),
  video_width: lenientInt.nullish(),
  video_height: lenientInt.nullish(),
  base_resp: BaseResp.nullish(),
});
export type MiniMaxTask = z.infer<typeof MiniMaxTask>;

export const MiniMaxFile = z.looseObject({ file: z.looseObject({ file_id: z.union([z.string(), z.number()]).nullish(), download_url: z.string().min(1) }) });

const MiniMaxAnswer = z.looseObject({ status: z.string().nullish(), base_resp: BaseResp.nullish() });

/** Hailuo models render 768P at their smallest; the older 01 series renders 720P. */
export const resolutionFor = (upstreamModel: string): "768P" | "720P" => (/hailuo/i.test(upstreamModel) ? "768P" : "720P");

const DURATIONS = [6, 10];

export interface MiniMaxCreateBody {
  model: string;
  prompt: string;
  duration: number;
  resolution: "768P" | "720P";
  aigc_watermark: boolean;
  first_frame_image?: string;
  callback_url?: string;
}

/**
 * Our job as MiniMax's create body. MiniMax renders 6 or 10 seconds and takes no ratio: text-to-video comes out
 * 16:9, image-to-video follows the image, so a text-only task at another ratio is refused before it is sent.
 */
export function createBody(job: VideoJobSpec, model: VendorModel, callbackUrl: string | undefined): MiniMaxCreateBody {
  if (!DURATIONS.includes(job.durationSeconds)) throw new ProviderRejected(`MiniMax renders 6 or 10 seconds, not ${job.durationSeconds}`);
  const image = job.references.image_url && model.capabilities.includes("image") ? job.references.image_url : undefined;
  if (!image && job.ratio !== "16:9") throw new ProviderRejected(`MiniMax renders text-to-video at 16:9 only, not ${job.ratio}; send an image to set the shape`);
  return {
    model: model.upstreamModel,
    prompt: job.prompt,
    duration: job.durationSeconds,
    resolution: resolutionFor(model.upstreamModel),
    aigc_watermark: job.watermark,
    ...(image ? { first_frame_image: image } : {}),
    ...(callbackUrl ? { callback_url: callbackUrl } : {}),
  };
}

/** The codes of a task that ended for its content (MiniMax's `Fail` with 1026 or 1027). */
export const isModerationCode = (code: number | undefined): boolean => code === 1026 || code === 1027;

/**
 * MiniMax's `base_resp` in our words (error codes from its error-code page). A query answer that carries a task
 * `status` is not an error even with a non-zero code: its `Fail` is read by the status mapping.
 */
export function readMiniMaxError(httpStatus: number, body: unknown): VendorErrorReading | undefined {
  const parsed = MiniMaxAnswer.safeParse(body);
  const base = parsed.success ? parsed.data.base_resp : undefined;
  const ok = httpStatus >= 200 && httpStatus < 300;
  if (ok && (!base || base.status_code === 0 || parsed.data?.status)) return undefined;
  const code = base ? String(base.status_code) : `HTTP ${httpStatus}`;
  return { kind: classifyMiniMax(httpStatus, base?.status_code), code, message: base?.status_msg ?? "" };
}

export function classifyMiniMax(httpStatus: number, code: number | undefined): VendorErrorReading["kind"] {
  if (code === undefined) return classOfHttpStatus(httpStatus);
  if (isModerationCode(code)) return "moderation";
  if ([1000, 1001, 1002, 1024, 1033].includes(code)) return "unavailable";
  if ([1004, 2049, 1008, 1028, 1030, 2038].includes(code)) return "misconfigured";
  if (code === 2013) return "rejected";
  return httpStatus >= 200 && httpStatus < 300 ? "rejected" : classOfHttpStatus(httpStatus);
}
