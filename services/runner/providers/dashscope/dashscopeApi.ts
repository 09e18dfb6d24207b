import { z } from "zod";
import type { Ratio } from "../../../../contracts/config.ts";
import type { VideoJobSpec } from "../../../../contracts/videoTask.ts";
import { ProviderRejected } from "../types.ts";
import { classOfHttpStatus, type VendorErrorReading } from "../vendor/vendorApi.ts";
import type { VendorModel } from "../vendor/vendorModels.ts";
import { lenientNumber } from "../vendor/lenientNumbers.ts";

/**
 * Wan on Alibaba Cloud DashScope (vendors doc, section C), as dashscope-sdk-python's `VideoSynthesis` and
 * Model Studio's API reference describe it. Answers are parsed tolerantly: usage fields come as numbers or
 * strings and vary by model, unknown fields pass.
 */

export const DashScopeCreated = z.looseObject({ output: z.looseObject({ task_id: z.string().min(1), task_status: z.string().nullish() }) });

export const DashScopeTask = z.looseObject({
  request_id: z.string().nullish(),
  output: z.looseObject({
    task_id: z.string().nullish(),
    task_status: z.string(),
    video_url: z.string().nullish(),
    code: z.string().nullish(),
    message: z.string().nullish(),
  }),
  usage: z
    .looseObject({
      video_duration: lenientNumber.nullish(),
      duration: lenientNumber.nullish(),
      output_video_duration: lenientNumber.nullish(),
      video_count: lenientNumber.nullish(),
      SR: lenientNumber.nullish(),
    })
    .nullish(),
});
export type DashScopeTask = z.infer<typeof DashScopeTask>;

/** `{"request_id", "code", "message"}`: DashScope's body on every error answer. */
const DashScopeError = z.looseObject({ code: z.string().nullish(), message: z.string().nullish() });

/** Text-to-video frame sizes in the 720p class (`size` is `W*H`); 21:9 has none. */
const SIZES_720P: Partial<Record<Ratio, string>> = { "16:9": "1280*720", "9:16": "720*1280", "1:1": "960*960", "4:3": "1088*832", "3:4": "832*1088" };

/** First-and-last-frame models (`kf2v`) have their own endpoint; every other Wan model posts to video-generation. */
export const createPathOf = (upstreamModel: string): string =>
  /kf2v/i.test(upstreamModel) ? "/services/aigc/image2video/video-synthesis" : "/services/aigc/video-generation/video-synthesis";

export interface DashScopeCreateBody {
  model: string;
  input: { prompt: string; img_url?: string; first_frame_url?: string; audio_url?: string };
  parameters: { size?: string; resolution?: "720P"; duration: number; watermark: boolean; audio?: boolean };
}

/**
 * Our job as DashScope's create body. With an image the model animates it (image-to-video: `img_url`, or
 * `first_frame_url` for kf2v models) at `resolution: 720P`, following the image's shape; without one it renders
 * text-to-video at the ratio's 720p `size`. Audio is asked for only where the model has the audio capability.
 */
export function createBody(job: VideoJobSpec, model: VendorModel): DashScopeCreateBody {
  const image = job.references.image_url && model.capabilities.includes("image") ? job.references.image_url : undefined;
  const audio = model.capabilities.includes("audio");
  const input: DashScopeCreateBody["input"] = { prompt: job.prompt };
  if (image) input[/kf2v/i.test(model.upstreamModel) ? "first_frame_url" : "img_url"] = image;
  if (audio && job.references.audio_url) input.audio_url = job.references.audio_url;
  const size = SIZES_720P[job.ratio];
  if (!image && !size) throw new ProviderRejected(`Wan renders text-to-video at 16:9, 9:16, 1:1, 4:3 or 3:4, not ${job.ratio}`);
  return {
    model: model.upstreamModel,
    input,
    parameters: {
      ...(image ? { resolution: "720P" as const } : { size }),
      duration: job.durationSeconds,
      watermark: job.watermark,
      ...(audio ? { audio: job.generateAudio } : {}),
    },
  };
}

/** DashScope's codes first (vendors doc C.5), the HTTP status after. */
export function readDashScopeError(httpStatus: number, body: unknown): VendorErrorReading | undefined {
  if (httpStatus >= 200 && httpStatus < 300) return undefined;
  const parsed = DashScopeError.safeParse(body);
  const code = (parsed.success ? parsed.data.code : undefined) ?? `HTTP ${httpStatus}`;
  const message = (parsed.success ? parsed.data.message : undefined) ?? "";
  return { kind: classifyDashScope(httpStatus, code, message), code, message };
}

export function classifyDashScope(httpStatus: number, code: string, message: string): VendorErrorReading["kind"] {
  if (code === "DataInspectionFailed" || code.startsWith("DataInspection")) return "moderation";
  if (code === "Arrearage" || code === "InvalidApiKey" || code.startsWith("AccessDenied")) return "misconfigured";
  if (code === "InvalidParameter" && /model not exist/i.test(message)) return "notFound";
  if (code.startsWith("Throttling") || code === "InternalError" || code.startsWith("InternalError")) return "unavailable";
  return classOfHttpStatus(httpStatus);
}
