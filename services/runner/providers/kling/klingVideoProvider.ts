import type { z } from "zod";
import type { VendorSettings } from "../../../../contracts/config.ts";
import type { Logger } from "../../../shared/log.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import type { AcceptedTask, ProviderStatus, ProviderTask, VideoProvider } from "../types.ts";
import { callbackUrlOf } from "../vendor/callbackUrl.ts";
import { asPortErrors, isUnknownTask, portErrorOf, VendorApi, VendorCallError } from "../vendor/vendorApi.ts";
import { modelFor, requiredKey, type VendorModel } from "../vendor/vendorModels.ts";
import { lostUpstream } from "../vendor/vendorOutcomes.ts";
import { createBody, familyOf, KlingAnswer, readKlingError, TOKEN_EXPIRED } from "./klingApi.ts";
import { klingStatusOf } from "./klingStatus.ts";
import { KlingToken } from "./klingToken.ts";

const VENDOR = "Kling";

/**
 * Kling: create `POST {baseUrl}/v1/videos/{text2video|image2video}`, poll `GET …/{family}/{task_id}`, both
 * with a JWT signed from the access key and secret key (klingToken.ts). The result is a URL kept 30 days,
 * copied into our store. Kling has no cancel. The task's client reference is Kling's `external_task_id`, by
 * which a create whose answer was lost is found again.
 */
export class KlingVideoProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly api: VendorApi;
  private token: KlingToken | undefined;
  private readonly callbackUrl: string | undefined;

  constructor(
    private readonly settings: Extract<VendorSettings, { kind: "kling" }>,
    private readonly deps: { channel: string; log: Logger; accessKey: string | undefined; secretKey: string | undefined; models: ReadonlyMap<string, VendorModel> },
  ) {
    this.policy = policyOf(settings);
    this.callbackUrl = callbackUrlOf(settings, deps.channel);
    this.api = new VendorApi(VENDOR, settings, async () => ({ authorization: `Bearer ${await this.bearer()}` }), readKlingError);
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const model = modelFor(this.deps.models, task.job.model, VENDOR);
    const body = createBody(task.job, model, task.clientReference, this.callbackUrl);
    const created = await asPortErrors(() => this.call("POST", `/v1/videos/${familyOf(task.job, model)}`, task.signal, KlingAnswer, body));
    return { providerTaskId: created.data.task_id };
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    const model = modelFor(this.deps.models, task.job.model, VENDOR);
    let answer: z.infer<typeof KlingAnswer>;
    try {
      answer = await this.call("GET", `/v1/videos/${familyOf(task.job, model)}/${encodeURIComponent(task.providerTaskId)}`, task.signal, KlingAnswer);
    } catch (error) {
      if (isUnknownTask(error)) return lostUpstream(`${task.providerTaskId}: ${error.message}`);
      throw portErrorOf(error);
    }
    const status = klingStatusOf(answer.data, model);
    if (status.state !== "unknown") return status;
    this.deps.log.warn({ providerTaskId: task.providerTaskId, status: status.status }, "unknown Kling task status; polling on");
    return { state: "queued" };
  }

  /** Kling answers a query by our `external_task_id` as by its own id. */
  async findByClientReference(task: ProviderTask): Promise<string | undefined> {
    const model = modelFor(this.deps.models, task.job.model, VENDOR);
    try {
      const answer = await this.call("GET", `/v1/videos/${familyOf(task.job, model)}/${encodeURIComponent(task.clientReference)}`, task.signal, KlingAnswer);
      return answer.data.task_id;
    } catch (error) {
      if (isUnknownTask(error)) return undefined;
      throw portErrorOf(error);
    }
  }

  async close(): Promise<void> {}

  private bearer(): Promise<string> {
    this.token ??= new KlingToken(requiredKey(this.deps.accessKey, this.settings.apiKeyEnv), requiredKey(this.deps.secretKey, this.settings.secretKeyEnv));
    return this.token.bearer();
  }

  /** A call, signed anew and tried once more when Kling says the token expired (1004). */
  private async call<T extends z.ZodType>(method: "GET" | "POST", path: string, signal: AbortSignal, schema: T, body?: object): Promise<z.infer<T>> {
    try {
      return await this.api.call(method, path, signal, schema, body);
    } catch (error) {
      if (!(error instanceof VendorCallError) || error.reading.code !== TOKEN_EXPIRED) throw error;
      this.deps.log.warn({ code: error.reading.code }, "Kling refused the token as expired; signing a new one");
      this.token?.renew();
      return this.api.call(method, path, signal, schema, body);
    }
  }
}
