import type { ReelayConfig } from "../../contracts/config.ts";
import { FFMPEG, locateProgram } from "../../infra/binaries.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { Settlement } from "../billing/settlement.ts";
import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { LocalProvider } from "./providers/local/localProvider.ts";
import type { VideoProvider } from "./providers/types.ts";
import { RunnerService } from "./runnerService.ts";

function createProviders(nats: Nats, config: ReelayConfig, log: Logger): Map<string, VideoProvider> {
  const providers = new Map<string, VideoProvider>();
  let ffmpegPath: string | undefined;
  for (const [name, settings] of Object.entries(config.providers)) {
    switch (settings.kind) {
      case "local":
        ffmpegPath ??= locateProgram(FFMPEG, (line) => log.info(line));
        providers.set(name, new LocalProvider(settings, { ffmpegPath, videos: nats.videos, log: log.child({ provider: name }) }));
        break;
    }
  }
  return providers;
}

/** Starts a runner: hosts video tasks from the WORK queue, and settles finished tasks, until `stop`. */
export async function startRunner(nats: Nats, config: ReelayConfig, log: Logger): Promise<{ stop(): Promise<void> }> {
  const providers = createProviders(nats, config, log);
  const runner = new RunnerService(nats, config, providers, log);
  const settlement = new Settlement(nats, new AccountLedger(nats), log.child({ part: "settlement" }));
  await runner.start();
  await settlement.start();
  return {
    stop: async () => {
      await runner.stop();
      await settlement.stop();
      await Promise.all([...providers.values()].map((provider) => provider.close()));
    },
  };
}
