import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Seedance's task API as Volcengine Ark and BytePlus ModelArk serve it (vendors doc, section A), for tests
 * and the bench: `POST/GET/DELETE {base}/contents/generations/tasks[/{id}]` under `/api/v3`, Bearer keys,
 * the SDK's request fields (explicit `null` accepted), `cgt-` ids, every status (queued, running,
 * succeeded, failed, cancelled, expired), usage as W·H·(24·duration+1)/1024 on success only, Ark's error
 * bodies and codes (401 AuthenticationError, 403 AccountOverdueError, 400 InvalidParameter and moderation
 * codes, 404 for unknown models and tasks, 429 RateLimitExceeded.EndpointRPMExceeded), a task list that
 * filters like the SDK's `list()`, callbacks to `callback_url`, and pre-signed result URLs that answer 403
 * once they expire, serving a real H.264 MP4. Test-only: never wired into the product.
 */

/** What the next creates do, in order (then they accept). */
export type ArkCreateBehaviour =
  | "accept"
  /** 429 RateLimitExceeded.EndpointRPMExceeded. */
  | "429"
  /** 500 InternalServiceError. */
  | "500"
  /** 403 AccountOverdueError: the account behind the key owes money. */
  | "overdue"
  /** 400 InputTextSensitiveContentDetected: input moderation, no task created. */
  | "moderation"
  /** The task is created, then the connection is dropped before the answer. */
  | "acceptThenLoseAnswer"
  /** The task is created and the answer never comes (until `stop`). */
  | "hang";

/** How a created task's generation goes: in status calls (`afterPolls`) or in time (`afterMs`). */
export type ArkGeneration =
  | { kind: "succeed"; afterPolls?: number; afterMs?: number }
  | { kind: "fail"; afterPolls?: number; afterMs?: number; code: string; message: string }
  | { kind: "expire"; afterPolls?: number; afterMs?: number }
  | { kind: "never" };

interface FakeTask {
  id: string;
  model: string;
  body: ArkCreateRequest;
  createdAt: number;
  polls: number;
  generation: ArkGeneration;
  /** Ark's statuses; tests may set any other string to play a status Ark might add. */
  status: "queued" | "running" | "succeeded" | "failed" | "cancelled" | "expired" | (string & {});
  finishedAt?: number;
  /** Which of Ark's undocumented shapes a non-final answer uses for `content` and `usage`. */
  runningShape: number;
}

/** The create body as the fake read it. */
export interface ArkCreateRequest {
  model: string;
  content: Array<{ type: string; text?: string; role?: string | null; image_url?: { url: string }; video_url?: { url: string }; audio_url?: { url: string } }>;
  ratio?: string | null;
  duration?: number | null;
  resolution?: string | null;
  generate_audio?: boolean | null;
  watermark?: boolean | null;
  safety_identifier?: string | null;
  callback_url?: string | null;
  [field: string]: unknown;
}

const SEEDANCE_2 = ["doubao-seedance-2-0-260128", "doubao-seedance-2-0-fast-260128", "dreamina-seedance-2-0-260128", "dreamina-seedance-2-0-fast-260128"];
const SEEDANCE_1 = ["doubao-seedance-1-0-pro-250528", "doubao-seedance-1-5-pro-251215", "seedance-1-0-pro-250528", "seedance-1-5-pro-251215"];
const RATIOS = ["21:9", "16:9", "4:3", "1:1", "3:4", "9:16", "adaptive"];
const RESOLUTIONS = ["480p", "720p", "1080p"];
const FRAME: Record<string, [number, number]> = { "16:9": [1280, 720], "9:16": [720, 1280], "1:1": [960, 960], "4:3": [1112, 834], "3:4": [834, 1112], "21:9": [1470, 630] };
const ROLES: Record<string, Array<string | null | undefined>> = {
  image_url: ["first_frame", "last_frame", "reference_image", null, undefined],
  video_url: ["reference_video"],
  audio_url: ["reference_audio"],
};

let sampleMp4: Buffer | undefined;
/** A real 1 s 1280x720 H.264 MP4, made once per process with the ffmpeg the tests located. */
export function arkSampleVideo(): Buffer {
  if (!sampleMp4) {
    const dir = mkdtempSync(join(tmpdir(), "reelay-ark-"));
    const file = join(dir, "sample.mp4");
    execFileSync(process.env.FFMPEG_BIN ?? "ffmpeg", ["-v", "error", "-f", "lavfi", "-i", "testsrc=size=1280x720:rate=24", "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-y", file]);
    sampleMp4 = readFileSync(file);
    rmSync(dir, { recursive: true, force: true });
  }
  return sampleMp4;
}

const requestId = () => `0217${Date.now()}${randomBytes(6).toString("hex")}`;
const arkError = (code: string, message: string, type: string, param = "") => ({ error: { code, message: `${message} Request id: ${requestId()}`, param, type } });
const taskId = () => {
  const now = new Date();
  const stamp = now.toISOString().replace(/[-:T]/g, "").slice(0, 14);
  return `cgt-${stamp}-${randomBytes(3).toString("hex").slice(0, 5)}`;
};

export class ArkUpstream {
  readonly creates: ArkCreateRequest[] = [];
  readonly tasks = new Map<string, FakeTask>();
  /** Status calls per task id. */
  readonly statusCalls = new Map<string, number>();
  readonly deletes: string[] = [];
  readonly lists: URLSearchParams[] = [];
  /** Every API call, in order, as `METHOD path` (result downloads not included). */
  readonly calls: string[] = [];
  generation: ArkGeneration = { kind: "succeed", afterPolls: 1 };
  /** Every API answer waits this long first (the bench's 50 ms upstream). */
  callDelayMs = 0;
  /** While true, every API call answers 500 (an upstream that is down). */
  down = false;
  /** Result URLs answer 403 this long after the task succeeded (Ark's are pre-signed for 24 h). */
  resultLifetimeMs = 24 * 60 * 60_000;
  /** Off: a succeeded task carries no `usage` (not seen from Ark, but its SDK types make it optional). */
  reportUsage = true;
  /** Creates per second before 429 RateLimitExceeded.EndpointRPMExceeded (0: no limit). */
  createsPerSecond = 0;
  /**
   * Tasks the account may have queued or running at once; a create beyond it answers 429 (Ark's rate-limit
   * error shape, as Ark and the other vendors refuse work past an account's concurrency). 0: no cap.
   */
  maxConcurrentTasks = 0;
  /** Creates refused because `maxConcurrentTasks` tasks were in flight. */
  refusedOverConcurrency = 0;
  /** When each accepted create arrived (epoch ms), in order. */
  readonly createTimes: number[] = [];
  /** Tasks created and not final: what this upstream is working on for us. */
  inFlight = 0;
  inFlightPeak = 0;
  baseUrl = "";
  private origin = "";
  private readonly createScript: ArkCreateBehaviour[] = [];
  private statusFailures: Array<"429" | "500"> = [];
  private readonly recentCreates: number[] = [];
  private readonly hanging = new Set<ServerResponse>();
  private server: Server | undefined;
  private shapes = 0;

  /** `apiKey`: the key this account accepts (`Authorization: Bearer <key>`). */
  constructor(private readonly apiKey: string) {}

  scriptCreates(...behaviours: ArkCreateBehaviour[]): void {
    this.createScript.push(...behaviours);
  }

  /** The next status calls answer these errors (429 with its rate-limit code, or 500). */
  failStatusCalls(...errors: Array<"429" | "500">): void {
    this.statusFailures.push(...errors);
  }

  /** Creates whose `safety_identifier` is `reference`. */
  createsFor(reference: string): ArkCreateRequest[] {
    return this.creates.filter((create) => create.safety_identifier === reference);
  }

  /** The task created with this `safety_identifier` (reelay's `reelay-task-<id>`), if any. */
  taskFor(reference: string): FakeTask | undefined {
    return [...this.tasks.values()].find((task) => task.body.safety_identifier === reference);
  }

  async start(): Promise<void> {
    arkSampleVideo();
    this.server = createServer((req, res) => void this.handle(req, res).catch((error: unknown) => this.send(res, 500, arkError("InternalServiceError", String(error), "InternalServiceError"))));
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    this.baseUrl = `${this.origin}/api/v3`;
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** The task as `GET …/tasks/{id}` shows it (exposed so tests can compare callbacks and lists). */
  view(task: FakeTask): Record<string, unknown> {
    const [width, height] = FRAME[task.body.ratio ?? "16:9"] ?? [1280, 720];
    const duration = task.body.duration ?? 5;
    const base = {
      id: task.id,
      model: task.model,
      status: task.status,
      created_at: Math.floor(task.createdAt / 1000),
      updated_at: Math.floor((task.finishedAt ?? Date.now()) / 1000),
      seed: 12345,
      resolution: task.body.resolution ?? "720p",
      ratio: task.body.ratio === "adaptive" || !task.body.ratio ? "16:9" : task.body.ratio,
      duration,
      framespersecond: 24,
      service_tier: "default",
      execution_expires_after: 172800,
      generate_audio: task.body.generate_audio ?? true,
      draft: false,
      ...(task.body.safety_identifier ? { safety_identifier: task.body.safety_identifier } : {}),
    };
    switch (task.status) {
      case "succeeded": {
        const tokens = Math.floor((width * height * (24 * duration + 1)) / 1024);
        const expires = (task.finishedAt ?? Date.now()) + this.resultLifetimeMs;
        const url = `${this.origin}/tos/doubao-seedance-2-0/${task.id}.mp4?X-Tos-Algorithm=TOS4-HMAC-SHA256&X-Tos-Expires=${expires}&X-Tos-Signature=${randomBytes(8).toString("hex")}`;
        return { ...base, content: { video_url: url }, ...(this.reportUsage ? { usage: { completion_tokens: tokens, total_tokens: tokens } } : {}) };
      }
      case "failed": {
        const generation = task.generation.kind === "fail" ? task.generation : { code: "InternalServiceError", message: "generation failed" };
        return { ...base, error: { code: generation.code, message: `${generation.message} Request id: ${requestId()}` }, content: {}, usage: { completion_tokens: 0, total_tokens: 0 } };
      }
      case "expired":
      case "cancelled":
        return { ...base, error: null, content: {} };
      default:
        // Not documented: absent, empty or zero-filled while a task is not done. Every shape in turn.
        switch (task.runningShape % 3) {
          case 0:
            return base;
          case 1:
            return { ...base, content: {}, usage: {} };
          default:
            return { ...base, content: { video_url: null }, usage: { completion_tokens: 0, total_tokens: 0 } };
        }
    }
  }

  private send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.destroyed) return;
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "x-request-id": requestId(), ...headers });
    res.end(JSON.stringify(body));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    if (url.pathname.startsWith("/tos/")) return this.download(url, res);
    this.calls.push(`${req.method} ${url.pathname}`);
    const body = await readBody(req);
    if (this.callDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.callDelayMs));
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
      return this.send(res, 401, arkError("AuthenticationError", "the API key or AK/SK in the request is missing or invalid.", "Unauthorized"));
    }
    if (this.down) return this.send(res, 500, arkError("InternalServiceError", "the service encountered an unexpected internal error.", "InternalServiceError"));
    const match = /^\/api\/v3\/contents\/generations\/tasks(?:\/([^/]+))?$/.exec(url.pathname);
    if (!match) return this.send(res, 404, arkError("NotFound", `the requested resource ${url.pathname} was not found.`, "NotFound"));
    const id = match[1];
    if (req.method === "POST" && !id) return this.create(body, res);
    if (req.method === "GET" && !id) return this.list(url.searchParams, res);
    const task = id ? this.tasks.get(decodeURIComponent(id)) : undefined;
    if (!task) return this.send(res, 404, arkError("NotFound.TaskId", `the specified task ${id ?? ""} is not found.`, "NotFound", "id"));
    if (req.method === "GET") return this.query(task, res);
    if (req.method === "DELETE") return this.delete(task, res);
    this.send(res, 405, arkError("MethodNotAllowed", `method ${req.method} is not allowed.`, "BadRequest"));
  }

  private download(url: URL, res: ServerResponse): void {
    const expires = Number(url.searchParams.get("X-Tos-Expires"));
    if (!Number.isFinite(expires) || Date.now() > expires) {
      res.writeHead(403, { "content-type": "application/xml" });
      res.end("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>");
      return;
    }
    const video = arkSampleVideo();
    res.writeHead(200, { "content-type": "video/mp4", "content-length": String(video.length) });
    res.end(video);
  }

  private create(text: string, res: ServerResponse): void {
    let body: ArkCreateRequest;
    try {
      body = JSON.parse(text) as ArkCreateRequest;
    } catch {
      return this.send(res, 400, arkError("InvalidParameter", "the request body is not valid JSON.", "BadRequest"));
    }
    const invalid = validate(body);
    if (invalid) return this.send(res, invalid.status, invalid.body);
    const behaviour = this.createScript.shift() ?? "accept";
    if (behaviour === "429") return this.send(res, 429, arkError("RateLimitExceeded.EndpointRPMExceeded", "the request has exceeded the RPM limit of the endpoint.", "TooManyRequests"));
    if (behaviour === "500") return this.send(res, 500, arkError("InternalServiceError", "the service encountered an unexpected internal error.", "InternalServiceError"));
    if (behaviour === "overdue") return this.send(res, 403, arkError("AccountOverdueError", "the request failed because your account has an overdue balance.", "Forbidden"));
    if (behaviour === "moderation") {
      return this.send(res, 400, arkError("InputTextSensitiveContentDetected", "the request failed because the input text may contain sensitive information.", "BadRequest", "content"));
    }
    const now = Date.now();
    while (this.recentCreates.length > 0 && (this.recentCreates[0] ?? 0) <= now - 1000) this.recentCreates.shift();
    if (this.createsPerSecond > 0 && this.recentCreates.length >= this.createsPerSecond) {
      return this.send(res, 429, arkError("RateLimitExceeded.EndpointRPMExceeded", "the request has exceeded the RPM limit of the endpoint.", "TooManyRequests"));
    }
    if (this.maxConcurrentTasks > 0 && this.inFlight >= this.maxConcurrentTasks) {
      this.refusedOverConcurrency++;
      return this.send(res, 429, arkError("RateLimitExceeded", "the request has exceeded the concurrent task limit of the account.", "TooManyRequests"));
    }
    this.recentCreates.push(now);
    this.createTimes.push(now);
    this.creates.push(body);
    const task: FakeTask = { id: taskId(), model: body.model, body, createdAt: now, polls: 0, generation: this.generation, status: "queued", runningShape: this.shapes++ };
    this.tasks.set(task.id, task);
    this.inFlight++;
    this.inFlightPeak = Math.max(this.inFlightPeak, this.inFlight);
    this.scheduleByTime(task);
    if (behaviour === "acceptThenLoseAnswer") return void res.destroy();
    if (behaviour === "hang") return void this.hanging.add(res);
    this.send(res, 200, { id: task.id });
  }

  private query(task: FakeTask, res: ServerResponse): void {
    this.statusCalls.set(task.id, (this.statusCalls.get(task.id) ?? 0) + 1);
    const failure = this.statusFailures.shift();
    if (failure === "429") return this.send(res, 429, arkError("ModelAccountRpmRateLimitExceeded", "the request has exceeded the account RPM limit of the model.", "TooManyRequests"));
    if (failure === "500") return this.send(res, 500, arkError("InternalServiceError", "the service encountered an unexpected internal error.", "InternalServiceError"));
    if (task.status === "queued" || task.status === "running") {
      task.polls++;
      const { generation } = task;
      if (generation.kind !== "never" && generation.afterPolls !== undefined) {
        if (task.polls >= generation.afterPolls) this.finish(task);
        else task.status = "running";
      }
    }
    this.send(res, 200, this.view(task));
  }

  private list(query: URLSearchParams, res: ServerResponse): void {
    this.lists.push(query);
    const pageNum = Number(query.get("page_num") ?? 1);
    const pageSize = Number(query.get("page_size") ?? 10);
    if (!(pageNum >= 1 && pageNum <= 500 && pageSize >= 1 && pageSize <= 500)) {
      return this.send(res, 400, arkError("InvalidParameter", "page_num and page_size must be between 1 and 500.", "BadRequest", "page_size"));
    }
    const ids = query.getAll("filter.task_ids");
    const matching = [...this.tasks.values()]
      .filter((task) => !query.get("filter.model") || task.model === query.get("filter.model"))
      .filter((task) => !query.get("filter.status") || task.status === query.get("filter.status"))
      .filter((task) => ids.length === 0 || ids.includes(task.id))
      .reverse();
    const items = matching.slice((pageNum - 1) * pageSize, pageNum * pageSize).map((task) => this.view(task));
    this.send(res, 200, { total: matching.length, items });
  }

  private delete(task: FakeTask, res: ServerResponse): void {
    this.deletes.push(task.id);
    if (task.status === "running") return this.send(res, 400, arkError("InvalidParameter", "only queued tasks can be cancelled.", "BadRequest", "id"));
    if (task.status === "queued") {
      task.status = "cancelled";
      task.finishedAt = Date.now();
      this.inFlight--;
    } else this.tasks.delete(task.id);
    this.send(res, 200, {});
  }

  private scheduleByTime(task: FakeTask): void {
    const { generation } = task;
    if (generation.kind === "never" || generation.afterMs === undefined) return;
    setTimeout(() => (task.status = task.status === "queued" ? "running" : task.status), generation.afterMs / 2).unref();
    setTimeout(() => this.finish(task), generation.afterMs).unref();
  }

  private finish(task: FakeTask): void {
    if (task.status !== "queued" && task.status !== "running") return;
    const kind = task.generation.kind;
    task.status = kind === "fail" ? "failed" : kind === "expire" ? "expired" : "succeeded";
    task.finishedAt = Date.now();
    this.inFlight--;
    const callback = task.body.callback_url;
    if (callback) {
      void fetch(callback, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(this.view(task)) }).catch(() => undefined);
    }
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Ark's create validation, as far as the vendors doc records it (A.2, A.6, A.9). */
function validate(body: ArkCreateRequest): { status: number; body: unknown } | undefined {
  const bad = (message: string, param: string) => ({ status: 400, body: arkError("InvalidParameter", `the parameter ${param} specified in the request is not valid: ${message}.`, "BadRequest", param) });
  if (typeof body !== "object" || body === null) return bad("expected an object", "body");
  if (typeof body.model !== "string" || body.model === "") return { status: 400, body: arkError("MissingParameter", "the request failed because it is missing the model parameter.", "BadRequest", "model") };
  const seedance2 = SEEDANCE_2.includes(body.model);
  if (!seedance2 && !SEEDANCE_1.includes(body.model)) {
    return { status: 404, body: arkError("InvalidEndpointOrModel.NotFound", `the model or endpoint ${body.model} does not exist or you do not have access to it.`, "NotFound", "model") };
  }
  if (!Array.isArray(body.content)) return { status: 400, body: arkError("MissingParameter", "the request failed because it is missing the content parameter.", "BadRequest", "content") };
  const texts = body.content.filter((item) => item.type === "text");
  if (texts.length !== 1 || typeof texts[0]?.text !== "string") return bad("exactly one text item is required", "content");
  for (const [index, item] of body.content.entries()) {
    if (item.type === "text") continue;
    const roles = ROLES[item.type];
    if (!roles) return bad(`unknown content type ${item.type}`, `content[${index}].type`);
    if (!roles.includes(item.role)) return bad(`role ${String(item.role)} is not valid for ${item.type}`, `content[${index}].role`);
    const payload = item[item.type as "image_url" | "video_url" | "audio_url"];
    if (typeof payload?.url !== "string" || payload.url === "") return bad("url is required", `content[${index}].${item.type}.url`);
    if (item.type !== "image_url" && !seedance2) return bad(`${item.type} is supported by Seedance 2.0 only`, `content[${index}]`);
  }
  const roles = body.content.map((item) => item.role ?? "");
  if (roles.some((role) => role.startsWith("reference_")) && roles.some((role) => role === "first_frame" || role === "last_frame")) {
    return bad("first/last frame and reference content cannot be mixed", "content");
  }
  if (seedance2 && body.content.some((item) => item.type === "audio_url") && !body.content.some((item) => item.type === "image_url" || item.type === "video_url")) {
    return bad("audio needs at least one reference image or video", "content");
  }
  if (body.ratio != null && !RATIOS.includes(body.ratio)) return bad(`ratio ${body.ratio}`, "ratio");
  if (body.resolution != null && !RESOLUTIONS.includes(body.resolution)) return bad(`resolution ${body.resolution}`, "resolution");
  const [min, max] = seedance2 ? [4, 15] : [2, 12];
  if (body.duration != null && body.duration !== -1 && !(Number.isInteger(body.duration) && body.duration >= min && body.duration <= max)) {
    return bad(`duration must be between ${min} and ${max}`, "duration");
  }
  for (const flag of ["generate_audio", "watermark", "camera_fixed", "return_last_frame"] as const) {
    if (body[flag] != null && typeof body[flag] !== "boolean") return bad(`${flag} must be a boolean`, flag);
  }
  if (body.callback_url != null && !/^https?:\/\//.test(body.callback_url)) return bad("callback_url must be an http(s) URL", "callback_url");
  return undefined;
}
