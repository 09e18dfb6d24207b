import type { ReelayConfig } from "../../contracts/config.ts";
import { ProviderSettings } from "../../contracts/config.ts";
import { loadConfig } from "../../services/shared/config.ts";
import { OpenAiVideosUpstream } from "../../test/fakes/openAiVideosUpstream.ts";

/** The variable the bench's reelay reads the fake upstream's key from (pass `env` to startReelay). */
export const INSTANT_UPSTREAM_KEY_ENV = "BENCH_VIDEO_UPSTREAM_KEY";
const INSTANT_UPSTREAM_KEY = "bench-upstream-key";

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
  const upstream = new OpenAiVideosUpstream(INSTANT_UPSTREAM_KEY);
  upstream.generation = { kind: "succeed", after: 0 };
  await upstream.start();
  const config = loadConfig();
  config.providers.instant = ProviderSettings.parse({
    kind: "openai",
    baseUrl: upstream.baseUrl,
    apiKeyEnv: INSTANT_UPSTREAM_KEY_ENV,
    model: "sora-2",
    pollFirstAfterMs: 0,
    pollEveryMs: options.pollEveryMs,
    pollMaxEveryMs: options.pollEveryMs,
    ...(options.maxInFlight === undefined ? {} : { maxInFlight: options.maxInFlight, deleteAfterCopy: false }),
    allowPrivateReferenceUrls: true,
  });
  const mini = config.videoModels["VideoModel-2.0-mini"];
  if (!mini) throw new Error("the shipped config has no VideoModel-2.0-mini");
  mini.provider = "instant";
  config.runner.allowPrivateResultUrls = true;
  return { upstream, config, env: { [INSTANT_UPSTREAM_KEY_ENV]: INSTANT_UPSTREAM_KEY } };
}
