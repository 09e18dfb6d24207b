import { z } from "zod";
import type { VideoJobSpec } from "../../../../contracts/videoTask.ts";
import { ProviderRejected } from "../types.ts";
import { classOfHttpStatus, type VendorErrorReading } from "../vendor/vendorApi.ts";
import { lenientInt } from "../vendor/lenientNumbers.ts";

/**
 * Google Veo on the Gemini API (vendors doc, section D.1), as googleapis/python-genai maps it: a long-running
 * operation from `:predictLongRunning`, camelCase JSON, Google's error body `{error: {code, message, status,
 * details}}`. An operation's `error` has been seen as an object and as a bare string: both are read.
 */

const OperationError = z.union([z.string(), z.looseObject({ code: z.number().nullish(), message: z.string().nullish() })]);

export const VeoOperation = z.looseObject({
  name: z.string().min(1),
  done: z.boolean().nullish(),
  error: OperationError.nullish(),
  response: z
    .looseObject({
      generateVideoResponse: z
        .looseObject({
          generatedSamples: z.array(z.looseObject({ video: z.looseObject({ uri: z.string().nullish() }).nullish() })).nullish(),
          raiMediaFilteredCount: lenientInt.nullish(),
          raiMediaFilteredReasons: z.array(z.string()).nullish(),
        })
        .nullish(),
    })
    .nullish(),
});
export type VeoOperation = z.infer<typeof VeoOperation>;

const GoogleError = z.looseObject({
  error: z.looseObject({
    code: z.number().nullish(),
    message: z.string().nullish(),
    status: z.string().nullish(),
    details: z.array(z.looseObject({ reason: z.string().nullish() })).nullish(),
  }),
});

const DURATIONS = [4, 6, 8];
const ASPECT_RATIOS = ["16:9", "9:16"];

export interface VeoImage {
  bytesBase64Encoded: string;
  mimeType: string;
}

export interface VeoCreateBody {
  instances: [{ prompt: string; image?: VeoImage }];
  parameters: { aspectRatio: string; durationSeconds: number; resolution: "720p"; sampleCount: 1 };
}

/**
 * Our job as Veo's create body: 720p, one sample, 4, 6 or 8 seconds at 16:9 or 9:16 (anything else is refused
 * before it is sent, naming what Veo takes). The Gemini API takes images only inline, as base64.
 */
export function createBody(job: VideoJobSpec, image: VeoImage | undefined): VeoCreateBody {
  if (!DURATIONS.includes(job.durationSeconds)) throw new ProviderRejected(`Veo renders 4, 6 or 8 seconds, not ${job.durationSeconds}`);
  if (!ASPECT_RATIOS.includes(job.ratio)) throw new ProviderRejected(`Veo renders 16:9 or 9:16, not ${job.ratio}`);
  return {
    instances: [{ prompt: job.prompt, ...(image ? { image } : {}) }],
    parameters: { aspectRatio: job.ratio, durationSeconds: job.durationSeconds, resolution: "720p", sampleCount: 1 },
  };
}

/** Google's canonical status names first (an invalid key is a 400 INVALID_ARGUMENT with reason API_KEY_INVALID). */
export function readGoogleError(httpStatus: number, body: unknown): VendorErrorReading | undefined {
  if (httpStatus >= 200 && httpStatus < 300) return undefined;
  const parsed = GoogleError.safeParse(body);
  const error = parsed.success ? parsed.data.error : undefined;
  const status = error?.status ?? `HTTP ${httpStatus}`;
  const reasons = (error?.details ?? []).map((detail) => detail.reason ?? "");
  return { kind: classifyGoogle(httpStatus, status, reasons), code: status, message: error?.message ?? "" };
}

export function classifyGoogle(httpStatus: number, status: string, reasons: readonly string[]): VendorErrorReading["kind"] {
  if (reasons.some((reason) => reason === "API_KEY_INVALID" || reason === "API_KEY_SERVICE_BLOCKED")) return "misconfigured";
  switch (status) {
    case "UNAUTHENTICATED":
    case "PERMISSION_DENIED":
    case "FAILED_PRECONDITION":
      return "misconfigured";
    case "RESOURCE_EXHAUSTED":
    case "UNAVAILABLE":
    case "INTERNAL":
    case "DEADLINE_EXCEEDED":
    case "ABORTED":
      return "unavailable";
    case "NOT_FOUND":
      return "notFound";
    case "INVALID_ARGUMENT":
    case "OUT_OF_RANGE":
      return "rejected";
    default:
      return classOfHttpStatus(httpStatus);
  }
}
