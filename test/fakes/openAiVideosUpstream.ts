import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import busboy from "busboy";

/** The smallest file that passes as an MP4 (an `ftyp` box), what this fake "renders". */
export const FAKE_MP4 = Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from("ftypisom"), Buffer.alloc(12)]);

type CreateBehaviour = "accept" | "429" | "500" | "quota";
type Generation = { kind: "succeed"; after: number } | { kind: "fail"; after: number; code: string; message: string };

interface FakeVideo {
  id: string;
  model: string;
  prompt: string;
  seconds: string;
  size: string;
  createdAt: number;
  polls: number;
  generation: Generation;
  completedAt?: number;
  deleted?: boolean;
}

/** What a create sent, as the fake parsed it from the multipart body. */
export interface ReceivedCreate {
  fields: Record<string, string>;
  reference?: { bytes: Buffer; type: string; name: string };
}

const MODELS = ["sora-2", "sora-2-pro"];
const SECONDS = ["4", "8", "12"];
const SIZES = ["720x1280", "1280x720", "1024x1792", "1792x1024"];

const openAiError = (message: string, type: string, code: string | null, param: string | null = null) => ({ error: { message, type, param, code } });

/**
 * OpenAI's Videos API as documented for the SDKs' `videos` resource (`/v1/videos` create as multipart,
 * retrieve, content, delete), with OpenAI's error bodies: 401 for a wrong key, 400 naming the parameter,
 * 404 for an unknown video, 429 `rate_limit_exceeded`. Statuses go queued → in_progress (progress rising)
 * → completed or failed, one step per retrieve; content expires when told to. Test-only.
 */
export class OpenAiVideosUpstream {
  readonly creates: ReceivedCreate[] = [];
  readonly deletes: string[] = [];
  readonly videos = new Map<string, FakeVideo>();
  private readonly createScript: CreateBehaviour[] = [];
  generation: Generation = { kind: "succeed", after: 2 };
  /** False: DELETE answers 405 as LiteLLM's proxy does (FastAPI, no DELETE route for videos). */
  deleteSupported = true;
  /** Content answers 404 from this long after completion (OpenAI's downloads expire). */
  contentLifetimeMs = Number.POSITIVE_INFINITY;
  /** Ids for the next creates, in order (a LiteLLM proxy's are 222 characters; another reelay's `video_<n>`); then random ones. */
  readonly nextIds: string[] = [];
  /** What every completed video's content is. */
  content: Buffer = FAKE_MP4;
  private server: Server | undefined;
  baseUrl = "";

  constructor(private readonly apiKey: string) {}

  /** The next creates behave like this, in order; then they accept. */
  scriptCreates(...behaviours: CreateBehaviour[]): void {
    this.createScript.push(...behaviours);
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res).catch((error: unknown) => this.send(res, 500, openAiError(String(error), "server_error", null))));
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  }

  private view(video: FakeVideo) {
    const status = video.completedAt !== undefined ? (video.generation.kind === "fail" ? "failed" : "completed") : video.polls === 0 ? "queued" : "in_progress";
    const progress = status === "queued" ? 0 : status === "in_progress" ? Math.min(99, Math.round((100 * video.polls) / (video.generation.after + 1))) : 100;
    return {
      id: video.id,
      object: "video",
      status,
      progress,
      model: video.model,
      prompt: video.prompt,
      seconds: video.seconds,
      size: video.size,
      created_at: video.createdAt,
      completed_at: video.completedAt ?? null,
      expires_at: video.completedAt === undefined || !Number.isFinite(this.contentLifetimeMs) ? null : video.completedAt + Math.floor(this.contentLifetimeMs / 1000),
      error: video.completedAt !== undefined && video.generation.kind === "fail" ? { code: video.generation.code, message: video.generation.message } : null,
      remixed_from_video_id: null,
    };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
      const shown = (req.headers.authorization ?? "").replace(/^Bearer\s+/i, "");
      return this.send(res, 401, openAiError(`Incorrect API key provided: ${shown.slice(0, 3)}***. You can find your API key at https://platform.openai.com/account/api-keys.`, "invalid_request_error", "invalid_api_key"));
    }
    const match = /^\/v1\/videos(?:\/([^/]+))?(\/content)?$/.exec(url.pathname);
    if (!match) return this.send(res, 404, openAiError(`Invalid URL (${req.method} ${url.pathname})`, "invalid_request_error", null));
    const [, id, content] = match;
    if (req.method === "POST" && !id) return this.create(req, res);
    const video = id ? this.videos.get(id) : undefined;
    if (!video || video.deleted) return this.send(res, 404, openAiError(`Video with id '${id}' not found.`, "invalid_request_error", null));
    if (req.method === "GET" && content) {
      const expired = video.completedAt !== undefined && Date.now() - video.completedAt * 1000 > this.contentLifetimeMs;
      if (video.completedAt === undefined || video.generation.kind === "fail" || expired) {
        return this.send(res, 404, openAiError(`Video with id '${video.id}' has no content available.`, "invalid_request_error", null));
      }
      res.writeHead(200, { "content-type": "video/mp4", "content-length": String(this.content.length) });
      res.end(this.content);
      return;
    }
    if (req.method === "GET") {
      if (video.completedAt === undefined) {
        video.polls++;
        if (video.polls > video.generation.after) video.completedAt = Math.floor(Date.now() / 1000);
      }
      return this.send(res, 200, this.view(video));
    }
    if (req.method === "DELETE") {
      if (!this.deleteSupported) return this.send(res, 405, { detail: "Method Not Allowed" }, { allow: "GET" });
      if (video.completedAt === undefined) return this.send(res, 400, openAiError("Only completed or failed videos can be deleted.", "invalid_request_error", null));
      video.deleted = true;
      this.deletes.push(video.id);
      return this.send(res, 200, { id: video.id, object: "video.deleted", deleted: true });
    }
    this.send(res, 405, openAiError(`Method ${req.method} not allowed`, "invalid_request_error", null));
  }

  private async create(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const behaviour = this.createScript.shift() ?? "accept";
    if (behaviour !== "accept") {
      req.resume();
      await once(req, "end");
      if (behaviour === "quota") return this.send(res, 429, openAiError("You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "insufficient_quota"));
      if (behaviour === "429") return this.send(res, 429, openAiError("Rate limit reached for requests", "requests", "rate_limit_exceeded"), { "retry-after": "0" });
      return this.send(res, 500, openAiError("The server had an error while processing your request.", "server_error", null));
    }
    const type = req.headers["content-type"] ?? "";
    if (!type.startsWith("multipart/form-data")) {
      req.resume();
      return this.send(res, 400, openAiError("Expected multipart/form-data.", "invalid_request_error", null));
    }
    let parsed: ReceivedCreate;
    try {
      parsed = await readForm(req, type);
    } catch (error) {
      return this.send(res, 400, openAiError(`Malformed multipart body: ${(error as Error).message}`, "invalid_request_error", null));
    }
    const { fields, reference } = parsed;
    this.creates.push({ fields, ...(reference ? { reference } : {}) });
    if (!fields.prompt) return this.send(res, 400, openAiError("Missing required parameter: 'prompt'.", "invalid_request_error", "missing_required_parameter", "prompt"));
    const model = fields.model ?? "sora-2";
    if (!MODELS.includes(model)) return this.send(res, 400, openAiError(`Invalid value: '${model}'. Supported values are: ${MODELS.join(", ")}.`, "invalid_request_error", "invalid_value", "model"));
    const seconds = fields.seconds ?? "4";
    if (!SECONDS.includes(seconds)) return this.send(res, 400, openAiError(`Invalid value: '${seconds}'. Supported values are: '4', '8', and '12'.`, "invalid_request_error", "invalid_value", "seconds"));
    const size = fields.size ?? "720x1280";
    if (!SIZES.includes(size)) return this.send(res, 400, openAiError(`Invalid value: '${size}'. Supported values are: ${SIZES.join(", ")}.`, "invalid_request_error", "invalid_value", "size"));
    const video: FakeVideo = { id: this.nextIds.shift() ?? `video_${randomUUID().replaceAll("-", "")}`, model, prompt: fields.prompt, seconds, size, createdAt: Math.floor(Date.now() / 1000), polls: 0, generation: this.generation };
    this.videos.set(video.id, video);
    this.send(res, 200, this.view(video));
  }
}

/** The fields and the one file of a multipart body, parsed with busboy as it streams in. */
function readForm(req: IncomingMessage, contentType: string): Promise<ReceivedCreate> {
  return new Promise((resolve, reject) => {
    const fields: Record<string, string> = {};
    const files: Array<Promise<NonNullable<ReceivedCreate["reference"]>>> = [];
    const parser = busboy({ headers: { "content-type": contentType } });
    parser.on("field", (name, value) => (fields[name] = value));
    parser.on("file", (_name, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      files.push(once(stream, "close").then(() => ({ bytes: Buffer.concat(chunks), type: info.mimeType, name: info.filename ?? "" })));
    });
    parser.on("error", reject);
    parser.on("close", () => {
      Promise.all(files).then(([reference]) => resolve({ fields, ...(reference ? { reference } : {}) }), reject);
    });
    req.pipe(parser);
  });
}
