import { readFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type { ProviderSettings } from "../../../../contracts/config.ts";
import type { Logger } from "../../../shared/log.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import { publicOnly } from "../../../shared/publicAddressGuard.ts";
import { fetchReference } from "../local/referenceFetch.ts";
import { ProviderMisconfigured, ProviderRejected, ProviderUnavailable, type AcceptedTask, type ProviderStatus, type ProviderTask, type VideoProvider } from "../types.ts";
import { resolutionOf, secondsOf, UpstreamVideo } from "./openAiVideoApi.ts";
import { describeRefusal, refusalOf, type Refusal } from "./upstreamRefusal.ts";
import { multipartBody, type FilePart } from "./multipartBody.ts";
import { callUpstream, parseJsonOrUndefined, retryAfterMs } from "../httpAnswers.ts";
import { upstreamUsageOf } from "../vendor/vendorModels.ts";

type OpenAiSettings = Extract<ProviderSettings, { kind: "openai" }>;

/** A reference image is uploaded as the `input_reference` file; larger ones are refused before upload. */
const MAX_REFERENCE_BYTES = 20 * 1024 * 1024;

/**
 * OpenAI's Videos API as a provider (also LiteLLM's proxy, SGLang Diffusion and another reelay, which
 * speak it): create with multipart `POST /videos`, poll `GET /videos/{id}`, and the runner copies
 * `GET /videos/{id}/content` (sent with our key, to the upstream's origin only). The API keeps no client
 * reference, so a submit whose answer was lost cannot be found again: the runner then submits once more
 * (see docs/vendors.md, "OpenAI-compatible video upstreams").
 */
export class OpenAiVideoProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly base: string;

  constructor(
    private readonly settings: OpenAiSettings,
    private readonly deps: {
      log: Logger;
      apiKey: string | undefined;
      /** Yuan per second the upstream charges, per video model (`upstreamPrice`), recorded beside our charge. */
      upstreamPrices: ReadonlyMap<string, number>;
    },
  ) {
    this.policy = policyOf(settings);
    this.base = settings.baseUrl.replace(/\/+$/, "");
    // Only with deleteAfterCopy is there anything to forget: without it the runner makes no call at all. A
    // failure goes to the runner, which logs it once per channel and shows it in `reelay channels`.
    if (settings.deleteAfterCopy) this.forget = (task) => this.cancel(task);
  }

  /** Deletes the upstream's copy once ours is stored (`deleteAfterCopy`). */
  readonly forget?: (task: AcceptedTask) => Promise<void>;

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const fields: Array<[string, string | FilePart]> = [
      ["model", this.settings.model],
      ["prompt", task.job.prompt],
      ["seconds", String(task.job.durationSeconds)],
      ["size", `${task.job.width}x${task.job.height}`],
    ];
    const dir = task.job.references.image_url ? await mkdtemp(join(tmpdir(), "reelay-openai-ref-")) : undefined;
    try {
      if (dir && task.job.references.image_url) {
        const dispatcher = this.settings.allowPrivateReferenceUrls ? undefined : publicOnly();
        const path = await fetchReference(task.job.references.image_url, dir, MAX_REFERENCE_BYTES, task.signal, dispatcher).catch((error: unknown) => {
          throw new ProviderRejected((error as Error).message);
        });
        fields.push(["input_reference", { bytes: await readFile(path), type: "", name: basename(path) }]);
      }
      const video = await this.call("POST", "/videos", task.signal, multipartBody(fields));
      return { providerTaskId: video.id };
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    const video = await this.call("GET", `/videos/${encodeURIComponent(task.providerTaskId)}`, task.signal).catch((error: unknown) => {
      // The upstream no longer knows the task (deleted, or expired long ago): it will never finish.
      if (error instanceof ProviderRejected) return undefined;
      throw error;
    });
    if (!video) return { state: "failed", reason: "the upstream generator no longer knows this task" };
    switch (video.status) {
      case "queued":
        return { state: "queued" };
      case "in_progress": {
        const progress = typeof video.progress === "number" && Number.isFinite(video.progress) ? Math.max(0, Math.min(100, Math.floor(video.progress))) : undefined;
        return progress === undefined ? { state: "running" } : { state: "running", progress };
      }
      case "completed": {
        const durationSeconds = secondsOf(video.seconds);
        const resolution = resolutionOf(video.size);
        // OpenAI-compatible upstreams bill seconds of video at a per-second price; none reports usage.
        const upstreamPrice = this.deps.upstreamPrices.get(task.job.model);
        return {
          state: "succeeded",
          result: { kind: "url", url: `${this.base}/videos/${encodeURIComponent(video.id)}/content`, headers: this.authorization() },
          ...(durationSeconds ? { durationSeconds } : {}),
          ...(resolution ? { resolution } : {}),
          upstreamUsage: upstreamUsageOf("seconds", durationSeconds ?? task.job.durationSeconds, upstreamPrice === undefined ? {} : { upstreamPrice }),
        };
      }
      case "failed": {
        const message = video.error?.message ?? "the upstream generator failed without a reason";
        return { state: "failed", reason: `video generation failed: ${message}`, detail: `${video.error?.code ?? "no code"}: ${message}` };
      }
      default:
        // A status we do not know never ends a task: it is logged and asked again.
        this.deps.log.warn({ providerTaskId: task.providerTaskId, status: video.status }, "unknown upstream video status; polling on");
        return { state: "queued" };
    }
  }

  async cancel(task: AcceptedTask): Promise<void> {
    await this.call("DELETE", `/videos/${encodeURIComponent(task.providerTaskId)}`, task.signal, undefined, false);
  }


  async close(): Promise<void> {}

  private authorization(): Record<string, string> {
    if (!this.deps.apiKey) throw new ProviderMisconfigured(`no upstream key: set the environment variable ${this.settings.apiKeyEnv}`);
    return { authorization: `Bearer ${this.deps.apiKey}` };
  }

  /** One call; a refusal becomes the port's error saying what it was (`errorOf`); no answer at all is unavailable. */
  private async call(method: "GET" | "POST" | "DELETE", path: string, signal: AbortSignal, form?: { body: Buffer; contentType: string }, parse = true): Promise<UpstreamVideo> {
    const headers = { ...this.authorization(), accept: "application/json", ...(form ? { "content-type": form.contentType } : {}) };
    const { status, text, headers: answerHeaders } = await callUpstream(`${this.base}${path}`, {
      method,
      headers,
      body: form?.body ?? null,
      signal,
      timeoutMs: this.policy.timeoutMs,
      what: `${method} ${path}`,
    });
    if (status >= 200 && status < 300) {
      if (!parse) return { id: "", status: "" };
      const video = UpstreamVideo.safeParse(parseJsonOrUndefined(text));
      if (!video.success) throw new ProviderUnavailable(`${method} ${path}: the upstream's answer is not a video object`);
      return video.data;
    }
    throw errorOf(refusalOf(status, text), method, path, answerHeaders["retry-after"]);
  }
}

/** The path as a pattern (`/videos/{id}`): what an operation is, without one task's id. */
const operationOf = (method: string, path: string): string => `${method} ${path.replace(/^\/videos\/[^/]+/, "/videos/{id}")}`;

/**
 * A refusal as the port's error, saying what it was: no balance, a refused key or a forbidden operation take
 * the channel out of rotation (misconfigured); 429 and 5xx are retried (unavailable); an unknown task, or a
 * value the upstream does not take, is the task's (rejected).
 */
function errorOf(refusal: Refusal, method: string, path: string, retryAfter: string | string[] | undefined): Error {
  const operation = operationOf(method, path);
  switch (refusal.kind) {
    case "no balance":
      return new ProviderMisconfigured(describeRefusal(refusal, `the upstream has no balance for our key (${operation})`));
    case "bad key":
      return new ProviderMisconfigured(describeRefusal(refusal, `the upstream refused our key (${operation})`));
    case "forbidden":
      return new ProviderMisconfigured(describeRefusal(refusal, `the upstream forbids ${operation} to our key`));
    case "unsupported operation":
      return new ProviderMisconfigured(describeRefusal(refusal, `the upstream does not support ${operation}`));
    case "rate limited":
    case "upstream error":
      return new ProviderUnavailable(describeRefusal(refusal, operation), retryAfterMs(retryAfter), true);
    case "not found":
      // No create path at all is our base URL's fault; an unknown video is that task's.
      if (method === "POST" && path === "/videos") return new ProviderMisconfigured(describeRefusal(refusal, `the upstream has no ${operation}: check baseUrl`));
      return new ProviderRejected(describeRefusal(refusal, `the upstream does not know this video (${operation})`));
    case "invalid request":
      return new ProviderRejected(`the upstream generator refused the task: ${refusal.message}`);
  }
}
