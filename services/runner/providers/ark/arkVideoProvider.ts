import type { VendorSettings } from "../../../../contracts/config.ts";
import type { Logger } from "../../../shared/log.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import type { AcceptedTask, ProviderStatus, ProviderTask, VideoProvider } from "../types.ts";
import { callbackUrlOf } from "../vendor/callbackUrl.ts";
import { ANY_ANSWER, asPortErrors, bearerKey, cancelBestEffort, isUnknownTask, portErrorOf, VendorApi } from "../vendor/vendorApi.ts";
import { modelFor, type VendorModel } from "../vendor/vendorModels.ts";
import { lostUpstream } from "../vendor/vendorOutcomes.ts";
import { ArkCreated, ArkTask, ArkTaskList, createBody, readArkError } from "./arkApi.ts";
import { arkStatusOf } from "./arkStatus.ts";

const TASKS = "/contents/generations/tasks";
const VENDOR = "Ark";

/**
 * Seedance on Volcengine Ark / BytePlus ModelArk: create `POST {baseUrl}/contents/generations/tasks`, poll
 * `GET …/tasks/{id}`, cancel a queued task with `DELETE …/tasks/{id}`. The result is a pre-signed URL the
 * runner copies into the object store. Ark keeps no idempotency key; the task's client reference rides in
 * `safety_identifier` and is looked for in the task list after a lost answer (see arkApi.ts `createBody`).
 */
export class ArkVideoProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly api: VendorApi;
  private readonly callbackUrl: string | undefined;

  constructor(
    settings: Extract<VendorSettings, { kind: "ark" }>,
    private readonly deps: { channel: string; log: Logger; apiKey: string | undefined; models: ReadonlyMap<string, VendorModel> },
  ) {
    this.policy = policyOf(settings);
    this.callbackUrl = callbackUrlOf(settings, deps.channel);
    this.api = new VendorApi(VENDOR, settings, bearerKey(deps.apiKey, settings.apiKeyEnv), readArkError);
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const body = createBody(task.job, modelFor(this.deps.models, task.job.model, VENDOR), task.clientReference, this.callbackUrl);
    const created = await asPortErrors(() => this.api.call("POST", TASKS, task.signal, ArkCreated, body));
    return { providerTaskId: created.id };
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    let answer: ArkTask;
    try {
      answer = await this.api.call("GET", `${TASKS}/${encodeURIComponent(task.providerTaskId)}`, task.signal, ArkTask);
    } catch (error) {
      // Queried past Ark's 7-day window, or deleted: it will never finish.
      if (isUnknownTask(error)) return lostUpstream(`${task.providerTaskId}: ${error.message}`);
      throw portErrorOf(error);
    }
    const status = arkStatusOf(answer, this.deps.models.get(task.job.model));
    if (status.state !== "unknown") return status;
    this.deps.log.warn({ providerTaskId: task.providerTaskId, status: status.status }, "unknown Ark task status; polling on");
    return { state: "queued" };
  }

  /** Ark cancels only queued tasks; a running one answers an error, which is fine: best effort. */
  async cancel(task: AcceptedTask): Promise<void> {
    await cancelBestEffort(() => this.api.call("DELETE", `${TASKS}/${encodeURIComponent(task.providerTaskId)}`, task.signal, ANY_ANSWER));
  }

  /** The newest tasks of the model, looked through for our reference (Ark keeps at most 120 queued per account). */
  async findByClientReference(task: ProviderTask): Promise<string | undefined> {
    const model = modelFor(this.deps.models, task.job.model, VENDOR);
    const query = new URLSearchParams({ page_num: "1", page_size: "100", "filter.model": model.upstreamModel });
    const list = await asPortErrors(() => this.api.call("GET", `${TASKS}?${query}`, task.signal, ArkTaskList));
    return list.items?.find((item) => item.safety_identifier === task.clientReference)?.id;
  }

  async close(): Promise<void> {}
}
