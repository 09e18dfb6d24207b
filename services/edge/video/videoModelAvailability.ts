import { channelsOf, keyVariablesOf, type ReelayConfig } from "../../../contracts/config.ts";
import type { Logger } from "../../shared/log.ts";

/**
 * Which provider entries can take work on this edge: those that need no key, and those whose key variable
 * is set. Read once at start (keys come from the environment, which does not change under a process); every
 * enabled model whose channels all lack a key (or, for Kling, one of its two) is named in one warning, and its creates answer 403.
 */
export function usableProviders(config: ReelayConfig, env: NodeJS.ProcessEnv, log: Logger): (provider: string) => boolean {
  const usable = new Set(
    Object.entries(config.providers)
      .filter(([, settings]) => keyVariablesOf(settings).every((variable) => Boolean(env[variable])))
      .map(([name]) => name),
  );
  for (const [name, model] of Object.entries(config.videoModels)) {
    if (!model.enabled) continue;
    const channels = channelsOf(model);
    if (!channels.some((channel) => usable.has(channel))) {
      const variables = channels.flatMap((channel) => {
        const settings = config.providers[channel];
        return settings ? keyVariablesOf(settings).filter((variable) => !env[variable]) : [];
      });
      log.warn({ model: name, variables }, "video model has no channel with an upstream key: creates answer 403 until one is set");
    }
  }
  return (provider) => usable.has(provider);
}
