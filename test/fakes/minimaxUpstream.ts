import type { IncomingMessage, ServerResponse } from "node:http";
import { FakeVendor, parseJson, type FakeTask } from "./vendorFake.ts";

/**
 * MiniMax Hailuo's video API (vendors doc, section E2): `POST /v1/video_generation`, `GET /v1/query/
 * video_generation?task_id=`, `GET /v1/files/retrieve?file_id=` → `file.download_url`. Bearer keys; errors as
 * HTTP 200 with a non-zero `base_resp.status_code` (1002 rate limit, 1008 insufficient balance, 1026 sensitive
 * content, 2013 invalid parameters, 2049 invalid API key, 1000 unknown); statuses Preparing, Queueing,
 * Processing, Success (with `file_id`, `video_width`, `video_height`) and Fail; durations 6 or 10 (10 only at
 * 768P for Hailuo), resolutions per model; download addresses that expire. Test-only.
 */

export interface MiniMaxCreateRequest {
  model?: string;
  prompt?: string;
  duration?: number;
  resolution?: string;
  first_frame_image?: string;
  callback_url?: string;
  aigc_watermark?: boolean;
  [field: string]: unknown;
}

const RESOLUTIONS: Record<string, string[]> = {
  "MiniMax-Hailuo-2.3": ["768P", "1080P"],
  "MiniMax-Hailuo-2.3-Fast": ["768P", "1080P"],
  "MiniMax-Hailuo-02": ["512P", "768P", "1080P"],
  "T2V-01": ["720P"],
  "T2V-01-Director": ["720P"],
  "I2V-01": ["720P"],
  "I2V-01-Director": ["720P"],
};
const NEEDS_IMAGE = ["I2V-01", "I2V-01-Director", "MiniMax-Hailuo-2.3-Fast"];
const FRAMES: Record<string, [number, number]> = { "512P": [912, 512], "720P": [1280, 720], "768P": [1366, 768], "1080P": [1920, 1080] };

const baseResp = (status_code: number, status_msg: string) => ({ base_resp: { status_code, status_msg } });

export class MiniMaxUpstream extends FakeVendor<MiniMaxCreateRequest> {
  protected readonly basePath = "";
  /** Successful file retrievals (the third call). */
  fileRetrievals = 0;

  constructor(private readonly apiKey: string) {
    super();
  }

  protected promptOf(body: MiniMaxCreateRequest): string {
    return body.prompt ?? "";
  }

  protected internalError(): [number, unknown] {
    return [200, baseResp(1000, "unknown error")];
  }

  protected handle(req: IncomingMessage, url: URL, text: string, res: ServerResponse): void {
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) return this.send(res, 200, baseResp(2049, "invalid api key"));
    if (req.method === "POST" && url.pathname === "/v1/video_generation") return this.create(text, res);
    if (req.method === "GET" && url.pathname === "/v1/query/video_generation") return this.query(url.searchParams.get("task_id") ?? "", res);
    if (req.method === "GET" && url.pathname === "/v1/files/retrieve") return this.retrieve(url.searchParams.get("file_id") ?? "", res);
    this.send(res, 404, { ...baseResp(404, `404 page not found: ${url.pathname}`) });
  }

  private create(text: string, res: ServerResponse): void {
    const body = parseJson(text) as MiniMaxCreateRequest | undefined;
    if (typeof body !== "object" || body === null) return this.send(res, 200, baseResp(2013, "invalid params, body is not json"));
    this.createBodies.push(body);
    const invalid = validate(body);
    if (invalid) return this.send(res, 200, baseResp(2013, `invalid params, ${invalid}`));
    const trouble = this.createTrouble(this.promptOf(body));
    switch (trouble) {
      case "quota":
        return this.send(res, 200, baseResp(1008, "insufficient balance"));
      case "moderation":
        return this.send(res, 200, baseResp(1026, "input new_sensitive"));
      case "429":
        return this.send(res, 200, baseResp(1002, "rate limit exceeded(RPM)"));
      case "500":
        return this.send(res, ...this.internalError());
      default: {
        const task = this.createTask(body, String(106916112212032 + this.tasks.size), { fileId: String(176844028768320 + this.tasks.size) });
        if (trouble === "loseAnswer") return void res.destroy();
        this.send(res, 200, { task_id: task.id, ...baseResp(0, "success") });
      }
    }
  }

  private query(id: string, res: ServerResponse): void {
    const task = this.tasks.get(id);
    if (!task) return this.send(res, 200, baseResp(2013, "invalid params, task not found"));
    const trouble = this.pollTrouble(task);
    if (trouble === "429") return this.send(res, 200, baseResp(1002, "rate limit exceeded(RPM)"));
    if (trouble === "500") return this.send(res, ...this.internalError());
    this.advance(task);
    this.send(res, 200, this.view(task));
  }

  private retrieve(fileId: string, res: ServerResponse): void {
    const task = [...this.tasks.values()].find((known) => known.extra.fileId === fileId && known.status === "succeeded");
    if (!task) return this.send(res, 200, baseResp(2013, "invalid params, file not found"));
    this.fileRetrievals++;
    this.send(res, 200, {
      file: { file_id: fileId, bytes: 0, created_at: Math.floor((task.finishedAt ?? Date.now()) / 1000), filename: "output_aigc.mp4", purpose: "video_generation", download_url: this.resultUrl(task) },
      ...baseResp(0, "success"),
    });
  }

  private view(task: FakeTask<MiniMaxCreateRequest>): unknown {
    const base = { task_id: task.id };
    switch (task.status) {
      case "queued":
        return { ...base, status: task.polls <= 1 ? "Preparing" : "Queueing", ...baseResp(0, "success") };
      case "running":
        return { ...base, status: "Processing", ...baseResp(0, "success") };
      case "odd":
        return { ...base, status: "Reviewing", ...baseResp(0, "success") };
      case "failed":
      case "cancelled":
        return { ...base, status: "Fail", ...baseResp(0, "success") };
      case "moderated":
        return { ...base, status: "Fail", ...baseResp(1027, "output video new_sensitive") };
      case "noVideo":
        return { ...base, status: "Success", file_id: "", ...baseResp(0, "success") };
      case "succeeded": {
        const [width, height] = FRAMES[task.body.resolution ?? "768P"] ?? [1366, 768];
        return { ...base, status: "Success", file_id: task.extra.fileId, video_width: width, video_height: height, ...baseResp(0, "success") };
      }
    }
  }
}

/** MiniMax's create validation as far as the vendors doc records it (E2). */
function validate(body: MiniMaxCreateRequest): string | undefined {
  const resolutions = RESOLUTIONS[body.model ?? ""];
  if (!resolutions) return `model ${String(body.model)} is not supported`;
  if (typeof body.prompt !== "string" || body.prompt.length > 2000) return "prompt is required and at most 2000 characters";
  if (body.duration !== undefined && body.duration !== 6 && body.duration !== 10) return "duration must be 6 or 10";
  if (body.resolution !== undefined && !resolutions.includes(body.resolution)) return `resolution ${body.resolution} is not supported by ${String(body.model)}`;
  if (body.duration === 10 && body.resolution === "1080P") return "10 s is not available at 1080P";
  if (NEEDS_IMAGE.includes(body.model ?? "") && typeof body.first_frame_image !== "string") return "first_frame_image is required for this model";
  if (body.aigc_watermark !== undefined && typeof body.aigc_watermark !== "boolean") return "aigc_watermark must be a boolean";
  return undefined;
}
