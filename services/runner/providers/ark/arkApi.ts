import { z } from "zod";
import type { ImageRole } from "../../../../contracts/config.ts";
import type { VideoJobSpec } from "../../../../contracts/videoTask.ts";
import { classOfHttpStatus, type ErrorClass, type VendorErrorReading } from "../vendor/vendorApi.ts";
import type { VendorModel } from "../vendor/vendorModels.ts";
import { lenientInt, lenientTokens } from "../vendor/lenientNumbers.ts";

/**
 * Ark's content-generation task API (Volcengine Ark and BytePlus ModelArk share it), as the official SDKs
 * (volcengine-python-sdk `content_generation`, volcengine-go-sdk `content_generation.go`) and the BytePlus
 * pages describe it. Answers are parsed tolerantly: only `id` and `status` are required, numbers may come
 * as strings, `content`/`usage` may be absent, empty or zero-filled while a task runs, unknown fields pass.
 */


export const ArkTask = z.looseObject({
  id: z.string().min(1),
  status: z.string(),
  model: z.string().nullish(),
  error: z.looseObject({ code: z.string().nullish(), message: z.string().nullish() }).nullish(),
  content: z.looseObject({ video_url: z.string().nullish() }).nullish(),
  usage: z.looseObject({ completion_tokens: lenientTokens.nullish(), total_tokens: lenientTokens.nullish() }).nullish(),
  resolution: z.string().nullish(),
  ratio: z.string().nullish(),
  duration: lenientInt.nullish(),
  safety_identifier: z.string().nullish(),
});
export type ArkTask = z.infer<typeof ArkTask>;

export const ArkCreated = z.looseObject({ id: z.string().min(1) });
export const ArkTaskList = z.looseObject({ total: lenientInt.nullish(), items: z.array(ArkTask).nullish() });

/** `{"error": {"code", "message", "param", "type"}}`, Ark's error body on every non-2xx answer. */
export const ArkError = z.looseObject({
  error: z.looseObject({ code: z.string().nullish(), message: z.string().nullish(), param: z.string().nullish(), type: z.string().nullish() }),
});

type ContentItem =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string }; role: ImageRole }
  | { type: "video_url"; video_url: { url: string }; role: "reference_video" }
  | { type: "audio_url"; audio_url: { url: string }; role: "reference_audio" };

export interface ArkCreateBody {
  model: string;
  content: ContentItem[];
  ratio: string;
  duration: number;
  resolution: "720p";
  generate_audio: boolean;
  watermark: boolean;
  safety_identifier: string;
  callback_url?: string;
}

/**
 * Our job as Ark's create body. Every generation parameter is a JSON field, sent explicitly (mirrors disagree
 * on Ark's defaults for `watermark` and `generate_audio`); references go only where the model's capabilities
 * say (the edge already dropped the others and recorded them). `safety_identifier` carries the task's client
 * reference: it is the one caller-chosen string Ark keeps on the task and shows in its list, so a submit whose
 * answer was lost can be found again.
 */
export function createBody(job: VideoJobSpec, model: VendorModel, clientReference: string, callbackUrl: string | undefined): ArkCreateBody {
  const content: ContentItem[] = [{ type: "text", text: job.prompt }];
  const { image_url, video_url, audio_url } = job.references;
  if (image_url && model.capabilities.includes("image")) content.push({ type: "image_url", image_url: { url: image_url }, role: model.imageRole });
  if (video_url && model.capabilities.includes("video")) content.push({ type: "video_url", video_url: { url: video_url }, role: "reference_video" });
  if (audio_url && model.capabilities.includes("audio")) content.push({ type: "audio_url", audio_url: { url: audio_url }, role: "reference_audio" });
  return {
    model: model.upstreamModel,
    content,
    ratio: job.ratio,
    duration: job.durationSeconds,
    resolution: "720p",
    generate_audio: job.generateAudio,
    watermark: job.watermark,
    safety_identifier: clientReference,
    ...(callbackUrl ? { callback_url: callbackUrl } : {}),
  };
}

/** Ark reports the resolution class (`720p`) and the ratio; the spec's form is `<width>*<height>`. */
const FRAME_SIZES_720P: Record<string, string> = {
  "16:9": "1280*720",
  "9:16": "720*1280",
  "1:1": "960*960",
  "4:3": "1112*834",
  "3:4": "834*1112",
  "21:9": "1470*630",
};

export function resolutionOf(task: Pick<ArkTask, "resolution" | "ratio">): string | undefined {
  if (task.resolution?.toLowerCase() !== "720p" || !task.ratio) return undefined;
  return FRAME_SIZES_720P[task.ratio];
}

/** Ark's "Request id: …" suffix and similar internals stay out of what a customer reads. */
export const withoutRequestId = (message: string): string => message.replace(/\s*Request id:\s*\S+\s*$/i, "").trim();

export const isModerationCode = (code: string | null | undefined): boolean => /SensitiveContent/i.test(code ?? "");

/** How the runner should take an error answer: Ark's own codes first, the HTTP status after. */
export function classifyError(httpStatus: number, code: string | null | undefined): ErrorClass {
  const c = code ?? "";
  if (isModerationCode(c)) return "moderation";
  if (c === "QuotaExceeded" || c === "AccountOverdueError" || c === "AccessDenied" || c === "AuthenticationError") return "misconfigured";
  if (c === "ModelNotOpen" || c.startsWith("InvalidEndpoint") || c.startsWith("InvalidEndpointOrModel")) return "misconfigured";
  if (c.startsWith("RateLimitExceeded") || c.startsWith("ModelAccount") || c === "ServerOverloaded" || c === "ModelLoadingError") return "unavailable";
  return classOfHttpStatus(httpStatus);
}

/** Ark's error body read in our words (undefined for a success). */
export function readArkError(httpStatus: number, body: unknown): VendorErrorReading | undefined {
  if (httpStatus >= 200 && httpStatus < 300) return undefined;
  const error = ArkError.safeParse(body);
  const code = (error.success ? error.data.error.code : undefined) ?? `HTTP ${httpStatus}`;
  const message = withoutRequestId((error.success ? error.data.error.message : undefined) ?? "");
  return { kind: classifyError(httpStatus, code), code, message };
}
