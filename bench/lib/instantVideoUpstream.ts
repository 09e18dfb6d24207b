import type { ReelayConfig } from "../../contracts/config.ts";
import { loadConfig } from "../../services/shared/config.ts";
import type { OpenAiVideosUpstream } from "../../test/fakes/openAiVideosUpstream.ts";
import { addInstantUpstream } from "../../test/helpers/instantUpstream.ts";

/**
 * The fake OpenAI-compatible video upstream of the tests, finishing every video at its first status call
 * (instant and CPU-free, so a bench measures reelay's path rather than ffmpeg), and the shipped config with
 * `VideoModel-2.0-mini` on it, polled every `pollEveryMs`.
 */
export async function instantVideoUpstream(options: { pollEveryMs: number; maxInFlight?: number }): Promise<{
  upstream: OpenAiVideosUpstream;
  config: ReelayConfig;
  env: Record<string, string>;
}> {
  const config = loadConfig();
  const { upstream, env } = await addInstantUpstream(config, options);
  return { upstream, config, env };
}
