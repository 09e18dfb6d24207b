import type { ReelayConfig } from "../../contracts/config.ts";
import { ProviderSettings } from "../../contracts/config.ts";
import { OpenAiVideosUpstream } from "../fakes/openAiVideosUpstream.ts";

/** The variable a reelay process reads the fake upstream's key from (pass `env` to it). */
export const INSTANT_UPSTREAM_KEY_ENV = "INSTANT_VIDEO_UPSTREAM_KEY";
const INSTANT_UPSTREAM_KEY = "instant-upstream-key";

/**
 * Starts the fake OpenAI-compatible video upstream, finishing every video at its first status call (instant
 * and CPU-free), and adds it to `config` as provider `instant`, with `VideoModel-2.0-mini` on it: for a real
 * `reelay serve` (a child process, or the bench's), which cannot take a ScriptedVendor, where rendering is not
 * what is measured or tested.
 */
export async function addInstantUpstream(
  config: ReelayConfig,
  options: { pollEveryMs: number; maxInFlight?: number } = { pollEveryMs: 50 },
): Promise<{ upstream: OpenAiVideosUpstream; env: Record<string, string> }> {
  const upstream = new OpenAiVideosUpstream(INSTANT_UPSTREAM_KEY);
  upstream.generation = { kind: "succeed", after: 0 };
  await upstream.start();
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
  if (!mini) throw new Error("the config has no VideoModel-2.0-mini");
  mini.provider = "instant";
  config.runner.allowPrivateResultUrls = true;
  return { upstream, env: { [INSTANT_UPSTREAM_KEY_ENV]: INSTANT_UPSTREAM_KEY } };
}
