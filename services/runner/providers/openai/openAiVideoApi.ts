import { z } from "zod";

/**
 * What an OpenAI-compatible video upstream answers (the openai SDKs' `Video`), parsed tolerantly: other
 * upstreams (LiteLLM, SGLang Diffusion) leave fields out or add their own, so only `id` and `status` are
 * required and unknown fields pass.
 */
export const UpstreamVideo = z.looseObject({
  id: z.string().min(1),
  status: z.string(),
  progress: z.number().nullish(),
  seconds: z.union([z.string(), z.number()]).nullish(),
  size: z.string().nullish(),
  error: z.looseObject({ code: z.string().nullish(), message: z.string().nullish() }).nullish(),
});
export type UpstreamVideo = z.infer<typeof UpstreamVideo>;

/** OpenAI's error body; anything else is shown by its HTTP status alone. */
export const UpstreamError = z.looseObject({
  error: z.looseObject({ message: z.string().nullish(), code: z.string().nullish(), type: z.string().nullish() }),
});

/** `1280x720` → `1280*720` (the spec's resolution form); anything else is not a size we can report. */
export function resolutionOf(size: string | null | undefined): string | undefined {
  const match = /^(\d{2,5})x(\d{2,5})$/.exec(size ?? "");
  return match ? `${match[1]}*${match[2]}` : undefined;
}

export function secondsOf(seconds: string | number | null | undefined): number | undefined {
  const value = typeof seconds === "number" ? seconds : Number(seconds);
  return Number.isInteger(value) && value > 0 ? value : undefined;
}
