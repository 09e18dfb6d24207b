import type { VendorSettings } from "../../../contracts/config.ts";
import type { Logger } from "../../shared/log.ts";
import { ArkVideoProvider } from "./ark/arkVideoProvider.ts";
import { DashScopeVideoProvider } from "./dashscope/dashscopeVideoProvider.ts";
import { KlingVideoProvider } from "./kling/klingVideoProvider.ts";
import { MiniMaxVideoProvider } from "./minimax/minimaxVideoProvider.ts";
import type { VideoProvider } from "./types.ts";
import type { VendorModel } from "./vendor/vendorModels.ts";
import { VeoVideoProvider } from "./veo/veoVideoProvider.ts";

/** The adapter for a vendor entry, with its keys read from the environment once, at start. */
export function vendorProvider(channel: string, settings: VendorSettings, models: ReadonlyMap<string, VendorModel>, log: Logger): VideoProvider {
  const apiKey = process.env[settings.apiKeyEnv];
  switch (settings.kind) {
    case "ark":
      return new ArkVideoProvider(settings, { channel, log, apiKey, models });
    case "dashscope":
      return new DashScopeVideoProvider(settings, { log, apiKey, models });
    case "kling":
      return new KlingVideoProvider(settings, { channel, log, accessKey: apiKey, secretKey: process.env[settings.secretKeyEnv], models });
    case "minimax":
      return new MiniMaxVideoProvider(settings, { channel, log, apiKey, models });
    case "veo":
      return new VeoVideoProvider(settings, { log, apiKey, models });
  }
}
