import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { channelsOf, isVendorEntry, keyVariablesOf, upstreamPriceOf, type ProviderSettings, type ReelayConfig } from "../../contracts/config.ts";
import { RUNNER_SUBJECTS, UpstreamNews } from "../../contracts/runnerControl.ts";
import { FFMPEG, locateProgram } from "../../infra/binaries.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { LocalProvider } from "./providers/local/localProvider.ts";
import { meteredProvider } from "./providers/meteredProvider.ts";
import { OpenAiVideoProvider } from "./providers/openai/openAiVideoProvider.ts";
import { vendorProvider } from "./providers/vendorProviders.ts";
import { ChannelPool } from "./policy/channelPool.ts";
import { parseJsonOrUndefined } from "./providers/httpAnswers.ts";
import type { VideoProvider } from "./providers/types.ts";
import { RunnerService } from "./runnerService.ts";
import { vendorModelsOf } from "./providers/vendor/vendorModels.ts";
import { videoNameKey } from "./videoNames.ts";

/** Builds a provider for a config entry; tests pass their own to serve a name with a fake. */
export type ProviderFactory = (name: string, settings: ProviderSettings) => VideoProvider | undefined;

function createProviders(config: ReelayConfig, log: Logger, override?: ProviderFactory): Map<string, VideoProvider> {
  const providers = new Map<string, VideoProvider>();
  let ffmpegPath: string | undefined;
  for (const [name, settings] of Object.entries(config.providers)) {
    const substitute = override?.(name, settings);
    if (substitute) {
      providers.set(name, substitute);
      continue;
    }
    switch (settings.kind) {
      case "local":
        ffmpegPath ??= locateProgram(FFMPEG, (line) => log.info(line));
        providers.set(name, new LocalProvider(settings, { ffmpegPath, log: log.child({ provider: name }) }));
        break;
      case "openai": {
        const apiKey = process.env[settings.apiKeyEnv];
        // Tasks routed here fail with a clear reason until the key is set; say so once, at start.
        if (!apiKey) log.warn({ provider: name, variable: settings.apiKeyEnv }, "video provider has no upstream key: its tasks will fail until the variable is set");
        providers.set(name, new OpenAiVideoProvider(settings, { log: log.child({ provider: name }), apiKey, upstreamPrices: upstreamPricesOf(config, name) }));
        break;
      }
      default: {
        // A shipped entry no enabled model uses (ready to switch on) stays quiet without its key.
        const missing = keyVariablesOf(settings).filter((variable) => !process.env[variable]);
        if (missing.length > 0 && usedByEnabledModel(config, name)) log.warn({ provider: name, variables: missing }, "video provider has no upstream key: its tasks will fail until the variable is set");
        providers.set(name, vendorProvider(name, settings, vendorModelsOf(config, name), log.child({ provider: name })));
      }
    }
  }
  return providers;
}

/** The configured upstream price of each video model on a provider entry. */
function upstreamPricesOf(config: ReelayConfig, provider: string): Map<string, number> {
  const prices = new Map<string, number>();
  for (const [name, model] of Object.entries(config.videoModels)) {
    const price = channelsOf(model).includes(provider) ? upstreamPriceOf(model, provider) : undefined;
    if (price !== undefined) prices.set(name, price);
  }
  return prices;
}

const usedByEnabledModel = (config: ReelayConfig, provider: string): boolean =>
  Object.values(config.videoModels).some((model) => model.enabled && channelsOf(model).includes(provider));

/** Each provider entry as a channel of the pool, with its weight and cool-down (kinds without them: 1 and 5 min). */
function channelPoolOf(config: ReelayConfig, providers: ReadonlyMap<string, VideoProvider>, nats: Nats, log: Logger): ChannelPool {
  const settings = new Map(
    [...providers].map(([name, provider]) => {
      const entry = config.providers[name];
      const weight = isVendorEntry(entry) ? entry.weight : 1;
      const coolDownMs = isVendorEntry(entry) ? entry.coolDownMs : 5 * 60_000;
      return [name, { kind: entry?.kind ?? "custom", provider, weight, coolDownMs }] as const;
    }),
  );
  const fleet = { store: nats.fleet, runner: `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`, leaseMs: config.runner.leaseMs };
  return new ChannelPool(settings, fleet, log.child({ part: "channels" }));
}

/** Starts a runner: hosts video tasks from the task log (their first events) and sweeps orphaned reservations, until `stop`. */
export async function startRunner(nats: Nats, config: ReelayConfig, log: Logger, providerFactory?: ProviderFactory): Promise<{ stop(): Promise<void> }> {
  const providers = new Map([...createProviders(config, log, providerFactory)].map(([name, provider]) => [name, meteredProvider(name, provider)]));
  const channels = channelPoolOf(config, providers, nats, log);
  await channels.start();
  const runner = new RunnerService(nats, config, channels, log, await videoNameKey(nats.secrets));
  // A callback from an upstream wakes the task it names, if hosted here.
  const news = nats.nc.subscribe(RUNNER_SUBJECTS.upstreamNews, {
    callback: (_error, msg) => {
      const parsed = UpstreamNews.safeParse(parseJsonOrUndefined(msg.string()));
      if (parsed.success) runner.poke(parsed.data.channel, parsed.data.providerTaskId);
    },
  });
  await runner.start();
  return {
    stop: async () => {
      news.unsubscribe();
      await runner.stop();
      await channels.close();
      await Promise.all([...providers.values()].map((provider) => provider.close()));
    },
  };
}
