import type { VendorSettings } from "../../../../contracts/config.ts";
import type { Logger } from "../../../shared/log.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import type { AcceptedTask, ProviderStatus, ProviderTask, VideoProvider } from "../types.ts";
import { callbackUrlOf } from "../vendor/callbackUrl.ts";
import { asPortErrors, bearerKey, VendorApi } from "../vendor/vendorApi.ts";
import { modelFor, upstreamUsageOf, type VendorModel } from "../vendor/vendorModels.ts";
import { createBody, MiniMaxCreated, MiniMaxFile, MiniMaxTask, readMiniMaxError } from "./minimaxApi.ts";
import { miniMaxProgressOf } from "./minimaxStatus.ts";

const VENDOR = "MiniMax";

/**
 * MiniMax Hailuo: create `POST {baseUrl}/v1/video_generation`, poll `GET …/v1/query/video_generation?task_id=`,
 * and once it succeeded resolve its `file_id` with `GET …/v1/files/retrieve?file_id=` to a download address the
 * runner copies (three calls; the address is fetched anew on every success answer, so it is always fresh).
 * MiniMax keeps no caller reference and has no cancel: a create whose answer was lost is submitted again.
 */
export class MiniMaxVideoProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly api: VendorApi;
  private readonly callbackUrl: string | undefined;

  constructor(
    settings: Extract<VendorSettings, { kind: "minimax" }>,
    private readonly deps: { channel: string; log: Logger; apiKey: string | undefined; models: ReadonlyMap<string, VendorModel> },
  ) {
    this.policy = policyOf(settings);
    this.callbackUrl = callbackUrlOf(settings, deps.channel);
    this.api = new VendorApi(VENDOR, settings, bearerKey(deps.apiKey, settings.apiKeyEnv), readMiniMaxError);
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const body = createBody(task.job, modelFor(this.deps.models, task.job.model, VENDOR), this.callbackUrl);
    const created = await asPortErrors(() => this.api.call("POST", "/v1/video_generation", task.signal, MiniMaxCreated, body));
    return { providerTaskId: created.task_id };
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    const query = new URLSearchParams({ task_id: task.providerTaskId });
    const answer = await asPortErrors(() => this.api.call("GET", `/v1/query/video_generation?${query}`, task.signal, MiniMaxTask));
    const progress = miniMaxProgressOf(answer, task.providerTaskId);
    if (progress.state === "unknown") {
      this.deps.log.warn({ providerTaskId: task.providerTaskId, status: progress.status }, "unknown MiniMax task status; polling on");
      return { state: "queued" };
    }
    if (progress.state !== "finished") return progress;
    const file = await asPortErrors(() => this.api.call("GET", `/v1/files/retrieve?${new URLSearchParams({ file_id: progress.fileId })}`, task.signal, MiniMaxFile));
    const model = this.deps.models.get(task.job.model);
    return {
      state: "succeeded",
      result: { kind: "url", url: file.file.download_url },
      durationSeconds: task.job.durationSeconds,
      ...(progress.resolution ? { resolution: progress.resolution } : {}),
      ...(model ? { upstreamUsage: upstreamUsageOf("seconds", task.job.durationSeconds, model) } : {}),
    };
  }

  async close(): Promise<void> {}
}
