import type { VendorSettings } from "../../../../contracts/config.ts";
import type { Logger } from "../../../shared/log.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import type { AcceptedTask, ProviderStatus, ProviderTask, VideoProvider } from "../types.ts";
import { ANY_ANSWER, asPortErrors, bearerKey, cancelBestEffort, VendorApi } from "../vendor/vendorApi.ts";
import { modelFor, type VendorModel } from "../vendor/vendorModels.ts";
import { createBody, createPathOf, DashScopeCreated, DashScopeTask, readDashScopeError } from "./dashscopeApi.ts";
import { dashScopeStatusOf } from "./dashscopeStatus.ts";

const VENDOR = "DashScope";

/**
 * Wan on DashScope: create `POST {baseUrl}/services/aigc/…/video-synthesis` with `X-DashScope-Async: enable`
 * (DashScope refuses video creates without it), poll `GET {baseUrl}/tasks/{id}`, cancel a pending task with
 * `POST {baseUrl}/tasks/{id}/cancel`. The result is a signed OSS URL valid 24 h, copied into our store.
 * DashScope keeps no caller reference on a task, so a create whose answer was lost cannot be found again:
 * the runner submits again (docs/operations.md, known limits).
 */
export class DashScopeVideoProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly api: VendorApi;

  constructor(
    settings: Extract<VendorSettings, { kind: "dashscope" }>,
    private readonly deps: { log: Logger; apiKey: string | undefined; models: ReadonlyMap<string, VendorModel> },
  ) {
    this.policy = policyOf(settings);
    this.api = new VendorApi(VENDOR, settings, bearerKey(deps.apiKey, settings.apiKeyEnv), readDashScopeError);
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const model = modelFor(this.deps.models, task.job.model, VENDOR);
    const body = createBody(task.job, model);
    const created = await asPortErrors(() => this.api.call("POST", createPathOf(model.upstreamModel), task.signal, DashScopeCreated, body, { "x-dashscope-async": "enable" }));
    return { providerTaskId: created.output.task_id };
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    const answer = await asPortErrors(() => this.api.call("GET", `/tasks/${encodeURIComponent(task.providerTaskId)}`, task.signal, DashScopeTask));
    const status = dashScopeStatusOf(answer, this.deps.models.get(task.job.model), task.providerTaskId);
    if (status.state !== "unknown") return status;
    this.deps.log.warn({ providerTaskId: task.providerTaskId, status: status.status }, "unknown DashScope task status; polling on");
    return { state: "queued" };
  }

  /** DashScope cancels only PENDING tasks; a running one answers an error, which is fine: best effort. */
  async cancel(task: AcceptedTask): Promise<void> {
    await cancelBestEffort(() => this.api.call("POST", `/tasks/${encodeURIComponent(task.providerTaskId)}/cancel`, task.signal, ANY_ANSWER));
  }

  async close(): Promise<void> {}
}
