import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import type { VendorSettings } from "../../../../contracts/config.ts";
import type { Logger } from "../../../shared/log.ts";
import { publicOnly } from "../../../shared/publicAddressGuard.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import { fetchReference } from "../local/referenceFetch.ts";
import { ProviderRejected, type AcceptedTask, type ProviderStatus, type ProviderTask, type VideoProvider } from "../types.ts";
import { asPortErrors, isUnknownTask, portErrorOf, VendorApi } from "../vendor/vendorApi.ts";
import { modelFor, requiredKey, upstreamUsageOf, type VendorModel } from "../vendor/vendorModels.ts";
import { lostUpstream } from "../vendor/vendorOutcomes.ts";
import { createBody, readGoogleError, VeoOperation, type VeoImage } from "./veoApi.ts";
import { veoProgressOf } from "./veoStatus.ts";

const VENDOR = "Veo";
/** The Gemini API's inline request limit is 20 MB; an image larger than this would not fit with its base64. */
const MAX_IMAGE_BYTES = 14 * 1024 * 1024;
const IMAGE_TYPES: Record<string, string> = { ".png": "image/png", ".jpg": "image/jpeg", ".webp": "image/webp" };

/**
 * Google Veo on the Gemini API: create `POST {baseUrl}/v1beta/models/{model}:predictLongRunning`, poll
 * `GET {baseUrl}/v1beta/{operation name}`, both with `x-goog-api-key`. The video's address needs the same key,
 * so the runner's copy sends it, to that address's origin only. Veo keeps no caller reference and documents
 * no cancel for these operations: a create whose answer was lost is submitted again.
 */
export class VeoVideoProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly api: VendorApi;

  constructor(
    private readonly settings: Extract<VendorSettings, { kind: "veo" }>,
    private readonly deps: { log: Logger; apiKey: string | undefined; models: ReadonlyMap<string, VendorModel> },
  ) {
    this.policy = policyOf(settings);
    this.api = new VendorApi(VENDOR, settings, () => this.keyHeader(), readGoogleError);
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const model = modelFor(this.deps.models, task.job.model, VENDOR);
    const image = task.job.references.image_url && model.capabilities.includes("image") ? await this.inlineImage(task.job.references.image_url, task.signal) : undefined;
    const body = createBody(task.job, image);
    const operation = await asPortErrors(() => this.api.call("POST", `/v1beta/models/${encodeURIComponent(model.upstreamModel)}:predictLongRunning`, task.signal, VeoOperation, body));
    return { providerTaskId: operation.name };
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    let operation: VeoOperation;
    try {
      // The name is Google's own path (`models/{model}/operations/{id}`): sent as it came, each part encoded.
      const path = task.providerTaskId.split("/").map(encodeURIComponent).join("/");
      operation = await this.api.call("GET", `/v1beta/${path}`, task.signal, VeoOperation);
    } catch (error) {
      if (isUnknownTask(error)) return lostUpstream(`${task.providerTaskId}: ${error.message}`);
      throw portErrorOf(error);
    }
    const progress = veoProgressOf(operation);
    if (progress.state !== "finished") return progress;
    const model = this.deps.models.get(task.job.model);
    return {
      state: "succeeded",
      result: { kind: "url", url: progress.uri, headers: this.keyHeader() },
      durationSeconds: task.job.durationSeconds,
      ...(model ? { upstreamUsage: upstreamUsageOf("seconds", task.job.durationSeconds, model) } : {}),
    };
  }

  async close(): Promise<void> {}

  private keyHeader(): Record<string, string> {
    return { "x-goog-api-key": requiredKey(this.deps.apiKey, this.settings.apiKeyEnv) };
  }

  /** The reference image, fetched with the same guards as the renderer's, as Veo's inline image. */
  private async inlineImage(url: string, signal: AbortSignal): Promise<VeoImage> {
    const dir = await mkdtemp(join(tmpdir(), "reelay-veo-ref-"));
    try {
      const dispatcher = this.settings.allowPrivateReferenceUrls ? undefined : publicOnly();
      const path = await fetchReference(url, dir, MAX_IMAGE_BYTES, signal, dispatcher).catch((error: unknown) => {
        throw new ProviderRejected((error as Error).message);
      });
      const mimeType = IMAGE_TYPES[extname(path)];
      if (!mimeType) throw new ProviderRejected("Veo takes PNG, JPEG or WebP images for image_url");
      return { bytesBase64Encoded: (await readFile(path)).toString("base64"), mimeType };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}
