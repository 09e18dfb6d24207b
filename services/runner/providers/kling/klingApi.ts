import { z } from "zod";
import type { VideoJobSpec } from "../../../../contracts/videoTask.ts";
import { ProviderRejected } from "../types.ts";
import { classOfHttpStatus, type VendorErrorReading } from "../vendor/vendorApi.ts";
import { lenientNumber } from "../vendor/lenientNumbers.ts";
import type { VendorModel } from "../vendor/vendorModels.ts";

/**
 * Kling's video API (vendors doc, section E1), as its API specification describes it: every answer is an
 * envelope `{code, message, request_id, data}` where `code` 0 means success; errors carry Kling's own code,
 * which tells a retryable rate limit (1302, 1303) from an empty balance (1101, 1102) although both are 429.
 */

export const KlingTask = z.looseObject({
  task_id: z.string().min(1),
  task_status: z.string(),
  task_status_msg: z.string().nullish(),
  task_info: z.looseObject({ external_task_id: z.string().nullish() }).nullish(),
  task_result: z
    .looseObject({ videos: z.array(z.looseObject({ id: z.string().nullish(), url: z.string().nullish(), duration: lenientNumber.nullish() })).nullish() })
    .nullish(),
});
export type KlingTask = z.infer<typeof KlingTask>;

export const KlingAnswer = z.looseObject({ code: z.number(), message: z.string().nullish(), data: KlingTask });

const KlingError = z.looseObject({ code: z.union([z.number(), z.string()]), message: z.string().nullish() });

/** Text-to-video and image-to-video are separate endpoints, and a task is queried under the one that made it. */
export type KlingFamily = "text2video" | "image2video";

export const familyOf = (job: VideoJobSpec, model: VendorModel): KlingFamily =>
  job.references.image_url && model.capabilities.includes("image") ? "image2video" : "text2video";

const DURATIONS = [5, 10];
const ASPECT_RATIOS = ["16:9", "9:16", "1:1"];

export interface KlingCreateBody {
  model_name: string;
  prompt: string;
  mode: "std";
  duration: "5" | "10";
  external_task_id: string;
  aspect_ratio?: string;
  image?: string;
  sound?: "on" | "off";
  callback_url?: string;
}

/**
 * Our job as Kling's create body. `mode: std` is Kling's 720p; `duration` is a string and only 5 or 10;
 * text-to-video takes 16:9, 9:16 or 1:1 (image-to-video follows the image). Anything else is refused before
 * it reaches Kling, naming what Kling takes. `external_task_id` carries the task's client reference: Kling
 * keeps it unique per account and answers queries by it, so a lost create answer is found again.
 */
export function createBody(job: VideoJobSpec, model: VendorModel, clientReference: string, callbackUrl: string | undefined): KlingCreateBody {
  if (!DURATIONS.includes(job.durationSeconds)) throw new ProviderRejected(`Kling renders 5 or 10 seconds, not ${job.durationSeconds}`);
  const family = familyOf(job, model);
  if (family === "text2video" && !ASPECT_RATIOS.includes(job.ratio)) throw new ProviderRejected(`Kling renders text-to-video at 16:9, 9:16 or 1:1, not ${job.ratio}`);
  return {
    model_name: model.upstreamModel,
    prompt: job.prompt,
    mode: "std",
    duration: String(job.durationSeconds) as "5" | "10",
    external_task_id: clientReference,
    ...(family === "text2video" ? { aspect_ratio: job.ratio } : { image: klingImageOf(job.references.image_url ?? "") }),
    ...(model.capabilities.includes("audio") ? { sound: job.generateAudio ? ("on" as const) : ("off" as const) } : {}),
    ...(callbackUrl ? { callback_url: callbackUrl } : {}),
  };
}

/** Kling takes an image as a URL or as raw base64: a `data:` URL is sent as its base64 alone. */
export const klingImageOf = (imageUrl: string): string => /^data:[^,]*;base64,/i.exec(imageUrl) ? imageUrl.slice(imageUrl.indexOf(",") + 1) : imageUrl;

/** Kling's token expired by Kling's clock: signed anew and the call tried once more. */
export const TOKEN_EXPIRED = "1004";

/** Kling's codes (vendors doc E1.4), the HTTP status only when the body has none. A 2xx with a non-zero code is an error too. */
export function readKlingError(httpStatus: number, body: unknown): VendorErrorReading | undefined {
  const parsed = KlingError.safeParse(body);
  const code = parsed.success ? String(parsed.data.code) : undefined;
  if (httpStatus >= 200 && httpStatus < 300 && (code === undefined || code === "0")) return undefined;
  const message = (parsed.success ? parsed.data.message : undefined) ?? "";
  return { kind: classifyKling(httpStatus, code), code: code ?? `HTTP ${httpStatus}`, message };
}

export function classifyKling(httpStatus: number, code: string | undefined): VendorErrorReading["kind"] {
  switch (code) {
    case "1301":
      return "moderation";
    case "1200":
    case "1201":
    case "1300":
      return "rejected";
    case "1202":
    case "1203":
      return "notFound";
    case "1302":
    case "1303":
    case "5000":
    case "5001":
    case "5002":
      return "unavailable";
    case "1000":
    case "1001":
    case "1002":
    case "1003":
    case TOKEN_EXPIRED:
    case "1100":
    case "1101":
    case "1102":
    case "1103":
    case "1304":
      return "misconfigured";
    default:
      return classOfHttpStatus(httpStatus);
  }
}
