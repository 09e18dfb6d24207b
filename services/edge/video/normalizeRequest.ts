import type { z } from "zod";
import { channelsOf, RATIO_FRAME_SIZES, type ReelayConfig } from "../../../contracts/config.ts";
import { CreateVideoRequest, estimateVideoTokens, REFERENCE_FIELDS, type VideoJobSpec } from "../../../contracts/videoTask.ts";
import { ForbiddenError, ValidationError } from "../../shared/errors.ts";

export interface NormalizedVideoRequest {
  job: VideoJobSpec;
  /** Reference fields sent for a capability the model lacks: ignored, not refused (spec rule 6). */
  ignoredFields: string[];
  /** Where the task's status changes are delivered. */
  callbackUrl?: string;
}

/**
 * Unknown fields named in an error, at most, and the characters of each name shown: a body of 1 MiB can hold
 * 60,000 field names (the whole list made a 700 KB answer) or one name of a million characters.
 */
const NAMED_FIELDS = 5;
const NAME_CHARS = 50;

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === "unrecognized_keys") {
    const named = issue.keys.slice(0, NAMED_FIELDS).map((key) => `"${key.slice(0, NAME_CHARS)}"`);
    const more = issue.keys.length - named.length;
    return `unknown field${issue.keys.length > 1 ? "s" : ""} ${named.join(", ")}${more > 0 ? ` and ${more} more` : ""}`;
  }
  if (issue.path.length === 0) return "request body must be a JSON object";
  return issue.message;
}

/** Characters as a customer counts them: an emoji or a rare CJK ideograph is one, not two UTF-16 units. */
const countCodePoints = (text: string): number => text.length - (text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g)?.length ?? 0);

/**
 * Applies the spec, design.md and the model config to a create body. Pure: throws typed errors naming the field.
 * `usable` says whether a provider entry can take work here (an upstream whose key is not set cannot).
 */
export function normalizeVideoRequest(body: unknown, config: ReelayConfig, usable: (provider: string) => boolean = () => true): NormalizedVideoRequest {
  const parsed = CreateVideoRequest.safeParse(body);
  if (!parsed.success) throw new ValidationError(parsed.error.issues.map(describeIssue).join("; "));
  const request = parsed.data;

  const model = Object.hasOwn(config.videoModels, request.model) ? config.videoModels[request.model] : undefined;
  // OpenAI's API answers an unknown model 404 `model_not_found` in its own words (not a permission problem).
  if (!model || !model.enabled) {
    throw new ForbiddenError(`model not supported: ${request.model.slice(0, 100)}`, {
      status: 404,
      param: "model",
      code: "model_not_found",
      message: `The model \`${request.model.slice(0, 100)}\` does not exist or is not a video model.`,
    });
  }
  const channels = channelsOf(model);
  // Refused before anything is reserved: a task no channel can run would only fail later.
  if (!channels.some(usable)) throw new ForbiddenError(`model not available: ${request.model.slice(0, 100)}`, { param: "model", code: "model_not_available" });

  const promptChars = countCodePoints(request.prompt);
  if (promptChars > config.limits.maxPromptChars) {
    throw new ValidationError(`prompt is ${promptChars} characters; the limit is ${config.limits.maxPromptChars}`);
  }
  const durationSeconds = request.duration ?? model.defaultDurationSeconds;
  if (durationSeconds < model.minDurationSeconds || durationSeconds > model.maxDurationSeconds) {
    const bounds = `must be between ${model.minDurationSeconds} and ${model.maxDurationSeconds} seconds for ${request.model}`;
    // OpenAI's create names the field `seconds`.
    throw new ValidationError(`duration ${bounds}`, { param: "seconds", message: `seconds ${bounds}` });
  }

  const references: VideoJobSpec["references"] = {};
  const ignoredFields: string[] = [];
  for (const [capability, field] of Object.entries(REFERENCE_FIELDS)) {
    const value = request[field];
    if (value === undefined) continue;
    if (model.capabilities.includes(capability as keyof typeof REFERENCE_FIELDS)) references[field] = value;
    else ignoredFields.push(field);
  }

  // The scheme as the URL parser reads it (`HTTP:` is http too), not as the text starts.
  if (request.callback_url !== undefined && new URL(request.callback_url).protocol === "http:" && !config.webhooks.allowHttp) {
    throw new ValidationError("callback_url must be an https URL (http is not allowed by this server)");
  }

  const { width, height } = RATIO_FRAME_SIZES[request.ratio];
  return {
    job: {
      model: request.model,
      provider: channels[0] ?? "",
      ...(channels.length > 1 ? { channels } : {}),
      prompt: request.prompt,
      durationSeconds,
      ratio: request.ratio,
      width,
      height,
      generateAudio: request.generate_audio,
      watermark: request.watermark,
      pricePerMillionTokens: model.pricePerMillionTokens,
      estimatedTokens: estimateVideoTokens(width, height, durationSeconds),
      references,
    },
    ignoredFields,
    ...(request.callback_url ? { callbackUrl: request.callback_url } : {}),
  };
}
