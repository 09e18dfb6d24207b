import type { z } from "zod";
import type { ProviderSettings } from "../../../../contracts/config.ts";
import { upstreamCallbackPath } from "../../../../contracts/runnerControl.ts";
import type { Logger } from "../../../shared/log.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import { ProviderMisconfigured, ProviderRejected, ProviderUnavailable, type AcceptedTask, type ProviderStatus, type ProviderTask, type VideoProvider } from "../types.ts";
import { ArkCreated, ArkError, ArkTask, ArkTaskList, classifyError, createBody, withoutRequestId, type ArkModel } from "./arkApi.ts";
import { arkStatusOf } from "./arkStatus.ts";
import { callUpstream, parseJsonOrUndefined, retryAfterMs } from "../httpAnswers.ts";

type ArkSettings = Extract<ProviderSettings, { kind: "ark" }>;

const TASKS = "/contents/generations/tasks";

/** A non-2xx answer, classified on Ark's own code. */
class ArkCallError extends Error {
  constructor(
    readonly kind: ReturnType<typeof classifyError>,
    readonly httpStatus: number,
    readonly code: string,
    readonly upstreamMessage: string,
    readonly retryAfterMs: number | undefined,
  ) {
    super(`HTTP ${httpStatus} ${code}: ${upstreamMessage}`);
  }
}

/**
 * Seedance on Volcengine Ark / BytePlus ModelArk: create `POST {baseUrl}/contents/generations/tasks`, poll
 * `GET …/tasks/{id}`, cancel a queued task with `DELETE …/tasks/{id}`. The result is a pre-signed URL the
 * runner copies into the object store. Ark keeps no idempotency key; the task's client reference rides in
 * `safety_identifier` and is looked for in the task list after a lost answer (see arkApi.ts `createBody`).
 */
export class ArkVideoProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly base: string;
  private readonly callbackUrl: string | undefined;

  constructor(
    private readonly settings: ArkSettings,
    private readonly deps: { channel: string; log: Logger; apiKey: string | undefined; models: ReadonlyMap<string, ArkModel> },
  ) {
    this.policy = policyOf(settings);
    this.base = settings.baseUrl.replace(/\/+$/, "");
    this.callbackUrl = settings.publicCallbackUrl ? `${settings.publicCallbackUrl.replace(/\/+$/, "")}${upstreamCallbackPath(deps.channel)}` : undefined;
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const model = this.modelOf(task.job.model);
    const body = createBody(task.job, model, task.clientReference, this.callbackUrl);
    const created = await this.call("POST", TASKS, task.signal, ArkCreated, body).catch((error: unknown) => {
      throw this.portError(error);
    });
    return { providerTaskId: created.id };
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    let answer: ArkTask;
    try {
      answer = await this.call("GET", `${TASKS}/${encodeURIComponent(task.providerTaskId)}`, task.signal, ArkTask);
    } catch (error) {
      // Ark no longer knows the task (queried past its 7-day window, or deleted): it will never finish.
      if (error instanceof ArkCallError && error.kind === "notFound") {
        return { state: "failed", reason: "the upstream generator no longer knows this task; no charge was made", detail: `${task.providerTaskId}: ${error.message}` };
      }
      throw this.portError(error);
    }
    const status = arkStatusOf(answer, {});
    if (status.state !== "unknown") return status;
    this.deps.log.warn({ providerTaskId: task.providerTaskId, status: status.status }, "unknown Ark task status; polling on");
    return { state: "queued" };
  }

  /** Ark cancels only queued tasks; a running one answers an error, which is fine: best effort. */
  async cancel(task: AcceptedTask): Promise<void> {
    await this.call("DELETE", `${TASKS}/${encodeURIComponent(task.providerTaskId)}`, task.signal, undefined).catch((error: unknown) => {
      if (error instanceof ArkCallError && (error.kind === "rejected" || error.kind === "notFound")) return;
      throw this.portError(error);
    });
  }

  /** The newest tasks of the model, looked through for our reference (Ark keeps at most 120 queued per account). */
  async findByClientReference(task: ProviderTask): Promise<string | undefined> {
    const model = this.modelOf(task.job.model);
    const query = new URLSearchParams({ page_num: "1", page_size: "100", "filter.model": model.upstreamModel });
    const list = await this.call("GET", `${TASKS}?${query}`, task.signal, ArkTaskList).catch((error: unknown) => {
      throw this.portError(error);
    });
    return list.items?.find((item) => item.safety_identifier === task.clientReference)?.id;
  }

  async close(): Promise<void> {}

  private modelOf(name: string): ArkModel {
    const model = this.deps.models.get(name);
    if (!model) throw new ProviderMisconfigured(`video model ${name} has no Ark model id for this provider (upstreamModel)`);
    return model;
  }

  private authorization(): Record<string, string> {
    if (!this.deps.apiKey) throw new ProviderMisconfigured(`no upstream key: set the environment variable ${this.settings.apiKeyEnv}`);
    return { authorization: `Bearer ${this.deps.apiKey}` };
  }

  private async call<T extends z.ZodType>(method: "GET" | "POST" | "DELETE", path: string, signal: AbortSignal, schema: T | undefined, body?: object): Promise<z.infer<T>> {
    const headers: Record<string, string> = { ...this.authorization(), accept: "application/json" };
    if (body) headers["content-type"] = "application/json";
    const { status, text, headers: answerHeaders } = await callUpstream(`${this.base}${path}`, {
      method,
      headers,
      body: body ? JSON.stringify(body) : null,
      signal,
      timeoutMs: this.policy.timeoutMs,
      what: `${method} ${path}`,
    });
    if (status >= 200 && status < 300) {
      if (!schema) return undefined as z.infer<T>;
      const parsed = schema.safeParse(parseJsonOrUndefined(text));
      if (!parsed.success) throw new ProviderUnavailable(`${method} ${path}: Ark's answer is not what its API documents`);
      return parsed.data;
    }
    const error = ArkError.safeParse(parseJsonOrUndefined(text));
    const code = (error.success ? error.data.error.code : undefined) ?? `HTTP ${status}`;
    const message = withoutRequestId((error.success ? error.data.error.message : undefined) ?? "");
    throw new ArkCallError(classifyError(status, code), status, code, message, retryAfterMs(answerHeaders["retry-after"]));
  }

  /** An error answer as the port's error: customer-readable where the customer will read it. */
  private portError(error: unknown): unknown {
    if (!(error instanceof ArkCallError)) return error;
    switch (error.kind) {
      case "moderation":
        return new ProviderRejected("the request was refused by the upstream's content policy");
      case "misconfigured":
        return new ProviderMisconfigured(`Ark refused this channel (${error.code}): ${error.upstreamMessage}`);
      case "unavailable":
        return new ProviderUnavailable(`Ark is busy or failing (${error.code})`, error.retryAfterMs);
      case "notFound":
        return new ProviderMisconfigured(`Ark has no such endpoint or model (${error.code}): check baseUrl and upstreamModel`);
      case "rejected":
        return new ProviderRejected(`the upstream generator refused the task: ${error.upstreamMessage || error.code}`);
    }
  }

}
