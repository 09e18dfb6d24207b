import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { FakeVendor, parseJson, type FakeTask } from "./vendorFake.ts";

/**
 * Wan on Alibaba Cloud DashScope (vendors doc, section C): `POST /api/v1/services/aigc/video-generation/
 * video-synthesis` (t2v, i2v) and `…/image2video/video-synthesis` (kf2v), both refused without
 * `X-DashScope-Async: enable`; `GET /api/v1/tasks/{id}` with PENDING/RUNNING/SUCCEEDED/FAILED/CANCELED and
 * UNKNOWN for ids it does not know; `POST /api/v1/tasks/{id}/cancel` for PENDING tasks only. Bearer keys,
 * error bodies `{request_id, code, message}` (InvalidApiKey, InvalidParameter, Arrearage, DataInspectionFailed,
 * Throttling.RateQuota, InternalError), failure code and message inside `output`, usage only on success with
 * numbers sent as strings every other task, and signed result URLs that expire. Test-only.
 */

export interface DashScopeCreateRequest {
  model?: string;
  input?: { prompt?: string; img_url?: string; first_frame_url?: string; audio_url?: string; [field: string]: unknown };
  parameters?: { size?: string; resolution?: string; duration?: number; watermark?: boolean; audio?: boolean; [field: string]: unknown };
}

const T2V = ["wan2.6-t2v", "wan2.5-t2v-preview", "wan2.2-t2v-plus"];
const I2V = ["wan2.6-i2v", "wan2.5-i2v-preview", "wan2.2-i2v-plus"];
const KF2V = ["wan2.2-kf2v-flash", "wan2.1-kf2v-plus"];
const T2V_SIZES = ["1280*720", "720*1280", "960*960", "1088*832", "832*1088", "1920*1080", "1080*1920", "1440*1440", "1632*1248", "1248*1632"];

const requestId = () => randomUUID();
const error = (code: string, message: string) => ({ request_id: requestId(), code, message });

export class DashScopeUpstream extends FakeVendor<DashScopeCreateRequest> {
  protected readonly basePath = "/api/v1";
  /** Creates refused for want of the async header. */
  syncRefusals = 0;
  private numbersAsStrings = false;

  constructor(private readonly apiKey: string) {
    super();
  }

  protected promptOf(body: DashScopeCreateRequest): string {
    return body.input?.prompt ?? "";
  }

  protected internalError(): [number, unknown] {
    return [500, error("InternalError", "An internal error has occured, please try again later or contact service support.")];
  }

  protected handle(req: IncomingMessage, url: URL, text: string, res: ServerResponse): void {
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) return this.send(res, 401, error("InvalidApiKey", "Invalid API-key provided."));
    const path = url.pathname;
    if (req.method === "POST" && (path === "/api/v1/services/aigc/video-generation/video-synthesis" || path === "/api/v1/services/aigc/image2video/video-synthesis")) {
      return this.create(req, path.includes("image2video"), text, res);
    }
    const task = /^\/api\/v1\/tasks\/([^/]+)(\/cancel)?$/.exec(path);
    if (task && req.method === "GET" && !task[2]) return this.query(decodeURIComponent(task[1] ?? ""), res);
    if (task && req.method === "POST" && task[2]) return this.cancel(decodeURIComponent(task[1] ?? ""), res);
    this.send(res, 404, error("NotFound", `Not Found: ${path}`));
  }

  private create(req: IncomingMessage, keyframes: boolean, text: string, res: ServerResponse): void {
    if (req.headers["x-dashscope-async"] !== "enable") {
      this.syncRefusals++;
      return this.send(res, 403, error("AccessDenied", "current user api does not support synchronous calls"));
    }
    const body = parseJson(text) as DashScopeCreateRequest | undefined;
    if (typeof body !== "object" || body === null) return this.send(res, 400, error("InvalidParameter", "The request body is not valid JSON."));
    this.createBodies.push(body);
    const invalid = validate(body, keyframes);
    if (invalid) return this.send(res, invalid[0], error(invalid[1], invalid[2]));
    switch (this.createTrouble(this.promptOf(body))) {
      case "quota":
        return this.send(res, 400, error("Arrearage", "Access denied, please make sure your account is in good standing."));
      case "moderation":
        return this.send(res, 400, error("DataInspectionFailed", "Input data may contain inappropriate content."));
      case "429":
        return this.send(res, 429, error("Throttling.RateQuota", "Requests rate limit exceeded, please try again later."));
      case "500":
        return this.send(res, ...this.internalError());
      case "loseAnswer":
        this.createTask(body, randomUUID());
        return void res.destroy();
      case undefined: {
        const task = this.createTask(body, randomUUID());
        return this.send(res, 200, { request_id: requestId(), output: { task_id: task.id, task_status: "PENDING" } });
      }
    }
  }

  private query(id: string, res: ServerResponse): void {
    const task = this.tasks.get(id);
    // DashScope answers an id it does not know (never issued, or past 24 h) with status UNKNOWN.
    if (!task) return this.send(res, 200, { request_id: requestId(), output: { task_id: id, task_status: "UNKNOWN" } });
    const trouble = this.pollTrouble(task);
    if (trouble === "429") return this.send(res, 429, error("Throttling", "Requests throttling triggered."));
    if (trouble === "500") return this.send(res, ...this.internalError());
    this.advance(task);
    this.send(res, 200, this.view(task));
  }

  private cancel(id: string, res: ServerResponse): void {
    const task = this.tasks.get(id);
    if (!task) return this.send(res, 400, error("InvalidParameter", "task id not found"));
    if (task.status !== "queued") return this.send(res, 400, error("UnsupportedOperation", "Failed to cancel the task, please confirm if the task is in PENDING status."));
    this.finish(task, "cancelled");
    this.send(res, 200, { request_id: requestId() });
  }

  private view(task: FakeTask<DashScopeCreateRequest>): unknown {
    const times = { submit_time: "2026-11-25 10:15:00.123", scheduled_time: "2026-11-25 10:15:02.456" };
    const base = { task_id: task.id, ...times };
    const request_id = requestId();
    switch (task.status) {
      case "queued":
        return { request_id, output: { ...base, task_status: "PENDING" } };
      case "running":
        return { request_id, output: { ...base, task_status: "RUNNING" } };
      case "odd":
        return { request_id, output: { ...base, task_status: "SUSPENDED_FOR_REVIEW" } };
      case "cancelled":
        return { request_id, output: { ...base, task_status: "CANCELED", end_time: "2026-11-25 10:16:40.010" } };
      case "failed":
        return { request_id, output: { ...base, task_status: "FAILED", code: "InternalError.Algo", message: "The input image resolution is too low." } };
      case "moderated":
        return { request_id, output: { ...base, task_status: "FAILED", code: "DataInspectionFailed", message: "Output data may contain inappropriate content." } };
      case "noVideo":
        return { request_id, output: { ...base, task_status: "SUCCEEDED", task_metrics: { TOTAL: 1, SUCCEEDED: 0, FAILED: 1 } } };
      case "succeeded": {
        const seconds = task.body.parameters?.duration ?? 5;
        this.numbersAsStrings = !this.numbersAsStrings;
        const usage = this.numbersAsStrings ? { video_count: "1", video_duration: String(seconds), SR: "720" } : { video_count: 1, video_duration: seconds, SR: 720 };
        return {
          request_id,
          output: { ...base, task_status: "SUCCEEDED", video_url: this.resultUrl(task), orig_prompt: task.prompt, task_metrics: { TOTAL: 1, SUCCEEDED: 1, FAILED: 0 } },
          usage,
        };
      }
    }
  }
}

/** DashScope's create validation as far as the vendors doc records it (C.2). */
function validate(body: DashScopeCreateRequest, keyframes: boolean): [number, string, string] | undefined {
  const model = body.model ?? "";
  if (!model) return [400, "BadRequest.EmptyModel", "Required parameter(model) missing or invalid."];
  const known = keyframes ? KF2V : [...T2V, ...I2V];
  if (!known.includes(model)) return [400, "InvalidParameter", "Model not exist."];
  const input = body.input ?? {};
  const parameters = body.parameters ?? {};
  if (typeof input.prompt !== "string" || input.prompt.length > 1500) return [400, "InvalidParameter", "input.prompt is required and at most 1500 characters."];
  if (I2V.includes(model) && typeof input.img_url !== "string") return [400, "InvalidParameter", "input.img_url is required for image-to-video."];
  if (KF2V.includes(model) && typeof input.first_frame_url !== "string") return [400, "InvalidParameter", "input.first_frame_url is required."];
  if (T2V.includes(model)) {
    if (input.img_url !== undefined) return [400, "InvalidParameter", "input.img_url is not supported by text-to-video models."];
    if (parameters.size !== undefined && !T2V_SIZES.includes(parameters.size)) return [400, "InvalidParameter", `parameters.size ${parameters.size} is not supported.`];
    if (parameters.resolution !== undefined) return [400, "InvalidParameter", "parameters.resolution is not supported by text-to-video models; use size."];
  } else if (parameters.resolution !== undefined && !["480P", "720P", "1080P"].includes(parameters.resolution)) {
    return [400, "InvalidParameter", `parameters.resolution ${parameters.resolution} is not supported.`];
  }
  const duration = parameters.duration;
  if (duration !== undefined && !(Number.isInteger(duration) && duration >= 2 && duration <= 15)) return [400, "InvalidParameter", "parameters.duration must be an integer from 2 to 15."];
  for (const flag of ["watermark", "audio", "prompt_extend"] as const) {
    if (parameters[flag] !== undefined && typeof parameters[flag] !== "boolean") return [400, "InvalidParameter", `parameters.${flag} must be a boolean.`];
  }
  return undefined;
}
