import type { ReelayConfig } from "../../contracts/config.ts";

/** One Ark provider entry for a test: which fake it talks to and under which key variable. */
export interface ArkChannelSpec {
  baseUrl: string;
  apiKeyEnv: string;
  maxInFlight?: number;
  weight?: number;
  coolDownMs?: number;
  publicCallbackUrl?: string;
  pollFirstAfterMs?: number;
  pollEveryMs?: number;
  timeoutMs?: number;
}

/** Adds Ark channels and Seedance models to a test config, polling fast unless the spec says otherwise. */
export function addArk(
  config: ReelayConfig,
  channels: Record<string, ArkChannelSpec>,
  models: Record<string, { provider: string | string[]; upstreamModel?: string; capabilities?: Array<"image" | "video" | "audio">; imageRole?: "first_frame" | "reference_image" }>,
): void {
  for (const [name, spec] of Object.entries(channels)) {
    config.providers[name] = {
      kind: "ark",
      baseUrl: spec.baseUrl,
      apiKeyEnv: spec.apiKeyEnv,
      weight: spec.weight ?? 1,
      coolDownMs: spec.coolDownMs ?? 60_000,
      pollFirstAfterMs: spec.pollFirstAfterMs ?? 0,
      pollEveryMs: spec.pollEveryMs ?? 50,
      pollMaxEveryMs: spec.pollEveryMs ?? 50,
      maxInFlight: spec.maxInFlight ?? 10,
      submitsPerSecond: 0,
      timeoutMs: spec.timeoutMs ?? 5_000,
      ...(spec.publicCallbackUrl ? { publicCallbackUrl: spec.publicCallbackUrl } : {}),
    };
  }
  for (const [name, model] of Object.entries(models)) {
    config.videoModels[name] = {
      provider: model.provider,
      upstreamModel: model.upstreamModel ?? "doubao-seedance-2-0-260128",
      imageRole: model.imageRole ?? "first_frame",
      enabled: true,
      capabilities: model.capabilities ?? ["image", "video", "audio"],
      pricePerMillionTokens: 46,
      minDurationSeconds: 4,
      maxDurationSeconds: 15,
      defaultDurationSeconds: 5,
    };
  }
}
