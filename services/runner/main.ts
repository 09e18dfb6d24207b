import type { ProviderSettings, ReelayConfig } from "../../contracts/config.ts";
import { FFMPEG, locateProgram } from "../../infra/binaries.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { ReservationSweeper } from "../billing/reservationSweeper.ts";
import { Settlement } from "../billing/settlement.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { LocalProvider } from "./providers/local/localProvider.ts";
import { meteredProvider } from "./providers/meteredProvider.ts";
import { OpenAiVideoProvider } from "./providers/openai/openAiVideoProvider.ts";
import type { VideoProvider } from "./providers/types.ts";
import { RunnerService } from "./runnerService.ts";

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
        providers.set(name, new OpenAiVideoProvider(settings, { log: log.child({ provider: name }), apiKey }));
        break;
      }
    }
  }
  return providers;
}

/** Starts a runner: hosts video tasks from the WORK queue, settles finished tasks and sweeps orphaned reservations, until `stop`. */
export async function startRunner(nats: Nats, config: ReelayConfig, log: Logger, providerFactory?: ProviderFactory): Promise<{ stop(): Promise<void> }> {
  const providers = new Map([...createProviders(config, log, providerFactory)].map(([name, provider]) => [name, meteredProvider(name, provider)]));
  const runner = new RunnerService(nats, config, providers, log);
  const ledger = new AccountLedger(nats);
  const settlement = new Settlement(nats, ledger, log.child({ part: "settlement" }));
  const sweeper = new ReservationSweeper(nats, ledger, config.runner.reservationSweepMs, log.child({ part: "sweeper" }));
  await runner.start();
  await settlement.start();
  sweeper.start();
  return {
    stop: async () => {
      await sweeper.stop();
      await runner.stop();
      await settlement.stop();
      await Promise.all([...providers.values()].map((provider) => provider.close()));
    },
  };
}
