import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { errors as joseErrors, jwtVerify } from "jose";
import { FakeVendor, parseJson, type FakeTask } from "./vendorFake.ts";

/**
 * Kling's video API (vendors doc, section E1): `POST /v1/videos/text2video` and `/v1/videos/image2video`,
 * `GET /v1/videos/{family}/{task_id or external_task_id}` (the family must match the create's), list by
 * page. Every call must carry a JWT, which the fake verifies: HS256 with the secret key, `iss` the access key,
 * `exp` and `nbf` checked (codes 1000–1004). Envelopes `{code, message, request_id, data}` with millisecond
 * timestamps; statuses submitted/processing/succeed/failed with the reason in `task_status_msg` while
 * `message` stays SUCCEED; error codes 1102 (resource pack depleted: HTTP 429 like the rate limits 1302/1303),
 * 1201, 1203, 1301, 5000; `duration` as a string of 5 or 10; `external_task_id` unique per account. No cancel.
 * Test-only.
 */

export interface KlingCreateRequest {
  model_name?: string;
  prompt?: string;
  mode?: string;
  duration?: unknown;
  aspect_ratio?: string;
  image?: string;
  image_tail?: string;
  external_task_id?: string;
  callback_url?: string;
  sound?: string;
  [field: string]: unknown;
}

const MODELS = ["kling-v1", "kling-v1-6", "kling-v2-master", "kling-v2-1-master", "kling-v2-5-turbo", "kling-v2-6"];
const I2V_ONLY = ["kling-v1-5", "kling-v2-1"];

const requestId = () => randomUUID();
const envelope = (code: number, message: string, data?: unknown) => ({ code, message, request_id: requestId(), ...(data === undefined ? {} : { data }) });

export class KlingUpstream extends FakeVendor<KlingCreateRequest> {
  protected readonly basePath = "";
  /** Tokens this account saw, and those it now refuses as expired (`expireIssuedTokens`). */
  readonly tokensSeen = new Set<string>();
  private readonly expiredTokens = new Set<string>();
  /** Answers with code 1004 (token expired). */
  expiredRefusals = 0;

  constructor(
    private readonly accessKey: string,
    private readonly secretKey: string,
  ) {
    super();
  }

  /** Every token issued so far expires now by Kling's clock (as when the two clocks disagree). */
  expireIssuedTokens(): void {
    for (const token of this.tokensSeen) this.expiredTokens.add(token);
  }

  protected promptOf(body: KlingCreateRequest): string {
    return body.prompt ?? "";
  }

  protected internalError(): [number, unknown] {
    return [500, envelope(5000, "Server internal error")];
  }

  protected async handle(req: IncomingMessage, url: URL, text: string, res: ServerResponse): Promise<void> {
    const refusal = await this.authenticate(req.headers.authorization);
    if (refusal) return this.send(res, 401, envelope(refusal[0], refusal[1]));
    const match = /^\/v1\/videos\/(text2video|image2video)(?:\/([^/]+))?$/.exec(url.pathname);
    if (!match) return this.send(res, 404, envelope(1202, `Invalid request method or path: ${url.pathname}`));
    const family = match[1] as string;
    if (req.method === "POST" && !match[2]) return this.create(family, text, res);
    if (req.method === "GET" && match[2]) return this.query(family, decodeURIComponent(match[2]), res);
    if (req.method === "GET") return this.list(family, url.searchParams, res);
    this.send(res, 404, envelope(1202, `Invalid request method: ${req.method}`));
  }

  private async authenticate(header: string | undefined): Promise<[number, string] | undefined> {
    const token = /^Bearer (\S+)$/.exec(header ?? "")?.[1];
    if (!token) return [1001, "Authorization is empty"];
    this.tokensSeen.add(token);
    if (this.expiredTokens.has(token)) {
      this.expiredRefusals++;
      return [1004, "Authorization is expired"];
    }
    try {
      await jwtVerify(token, new TextEncoder().encode(this.secretKey), { algorithms: ["HS256"], issuer: this.accessKey, requiredClaims: ["exp", "nbf"] });
      return undefined;
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) {
        this.expiredRefusals++;
        return [1004, "Authorization is expired"];
      }
      if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === "nbf") return [1003, "Authorization is not yet valid"];
      return [1002, "Authorization is invalid"];
    }
  }

  private create(family: string, text: string, res: ServerResponse): void {
    const body = parseJson(text) as KlingCreateRequest | undefined;
    if (typeof body !== "object" || body === null) return this.send(res, 400, envelope(1200, "Invalid request: body is not JSON"));
    this.createBodies.push(body);
    const invalid = this.validate(family, body);
    if (invalid) return this.send(res, invalid[0], envelope(invalid[1], invalid[2]));
    const trouble = this.createTrouble(this.promptOf(body));
    switch (trouble) {
      case "quota":
        return this.send(res, 429, envelope(1102, "Account balance not enough: the resource pack is depleted or expired"));
      case "moderation":
        return this.send(res, 400, envelope(1301, "Content security policy triggered: the prompt may contain sensitive information"));
      case "429":
        return this.send(res, 429, envelope(1303, "parallel task over resource pack limit"));
      case "500":
        return this.send(res, ...this.internalError());
      default: {
        const task = this.createTask(body, `8334467560${Math.floor(Math.random() * 1e8)}`, { family }, body.external_task_id);
        if (trouble === "loseAnswer") return void res.destroy();
        this.send(res, 200, envelope(0, "SUCCEED", this.view(task, false)));
      }
    }
  }

  private validate(family: string, body: KlingCreateRequest): [number, number, string] | undefined {
    const model = body.model_name ?? "kling-v1";
    if (!MODELS.includes(model) && !(family === "image2video" && I2V_ONLY.includes(model))) return [404, 1203, `model_name ${model} not found`];
    if (family === "text2video" && (typeof body.prompt !== "string" || body.prompt === "")) return [400, 1201, "prompt is required"];
    if (typeof body.prompt === "string" && body.prompt.length > 2500) return [400, 1201, "prompt exceeds 2500 characters"];
    if (body.mode !== undefined && body.mode !== "std" && body.mode !== "pro") return [400, 1201, "mode must be std or pro"];
    if (body.duration !== undefined && body.duration !== "5" && body.duration !== "10") return [400, 1201, 'duration must be the string "5" or "10"'];
    if (family === "text2video") {
      if (body.aspect_ratio !== undefined && !["16:9", "9:16", "1:1"].includes(body.aspect_ratio)) return [400, 1201, "aspect_ratio must be 16:9, 9:16 or 1:1"];
      if (body.image !== undefined) return [400, 1201, "image is not a text2video parameter"];
    } else if (typeof body.image !== "string" && typeof body.image_tail !== "string") {
      return [400, 1201, "image or image_tail is required"];
    } else if (body.image?.startsWith("data:")) {
      return [400, 1201, "image must be a URL or raw Base64 without a data: prefix"];
    }
    if (body.sound !== undefined && body.sound !== "on" && body.sound !== "off") return [400, 1201, "sound must be on or off"];
    if (body.external_task_id !== undefined && [...this.tasks.values()].some((task) => task.reference === body.external_task_id)) {
      return [400, 1201, "external_task_id already exists"];
    }
    return undefined;
  }

  private query(family: string, id: string, res: ServerResponse): void {
    const task = this.tasks.get(id) ?? [...this.tasks.values()].find((known) => known.reference === id);
    if (!task || task.extra.family !== family) return this.send(res, 404, envelope(1203, "task not found"));
    const trouble = this.pollTrouble(task);
    if (trouble === "429") return this.send(res, 429, envelope(1302, "request rate too high"));
    if (trouble === "500") return this.send(res, ...this.internalError());
    this.advance(task);
    this.send(res, 200, envelope(0, "SUCCEED", this.view(task, true)));
  }

  private list(family: string, query: URLSearchParams, res: ServerResponse): void {
    const pageNum = Number(query.get("pageNum") ?? 1);
    const pageSize = Number(query.get("pageSize") ?? 30);
    if (!(pageNum >= 1 && pageNum <= 1000 && pageSize >= 1 && pageSize <= 500)) return this.send(res, 400, envelope(1201, "pageNum or pageSize out of range"));
    const tasks = [...this.tasks.values()].filter((task) => task.extra.family === family).reverse();
    this.send(res, 200, envelope(0, "SUCCEED", tasks.slice((pageNum - 1) * pageSize, pageNum * pageSize).map((task) => this.view(task, true))));
  }

  private view(task: FakeTask<KlingCreateRequest>, withResult: boolean): unknown {
    const status = { queued: "submitted", running: "processing", odd: "in_review", succeeded: "succeed", noVideo: "succeed", failed: "failed", moderated: "failed", cancelled: "failed" }[task.status];
    const message = { failed: "Image pixel is invalid", moderated: "Failure to pass the risk control system", cancelled: "task cancelled" }[task.status as string] ?? "";
    const duration = String(task.body.duration ?? "5");
    const videos = task.status === "succeeded" ? [{ id: randomUUID(), url: this.resultUrl(task), duration: `${duration}.0` }] : [];
    return {
      task_id: task.id,
      task_status: status,
      task_status_msg: message,
      task_info: task.reference === undefined ? {} : { external_task_id: task.reference },
      created_at: task.createdAt,
      updated_at: task.finishedAt ?? Date.now(),
      ...(withResult ? { task_result: task.status === "succeeded" ? { videos } : {} } : {}),
    };
  }
}
