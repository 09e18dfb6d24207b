import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { FakeVendor, parseJson, type FakeTask } from "./vendorFake.ts";

/**
 * Google Veo on the Gemini API (vendors doc, section D.1): `POST /v1beta/models/{model}:predictLongRunning`
 * answers an operation `{name: "models/{model}/operations/{id}"}`; `GET /v1beta/{name}` shows it `done: false`,
 * then `done: true` with `response.generateVideoResponse.generatedSamples[].video.uri`, with `error` (as an
 * object, and every other time as a bare string), or with only `raiMediaFilteredCount` and reasons. Every call
 * and every video download needs `x-goog-api-key` (or `?key=`); errors are Google's `{error: {code, message,
 * status, details}}` (an invalid key is 400 INVALID_ARGUMENT with reason API_KEY_INVALID; 429
 * RESOURCE_EXHAUSTED; 404 NOT_FOUND for unknown models and operations). Images only inline as base64.
 * Test-only.
 */

export interface VeoCreateRequest {
  instances?: Array<{ prompt?: string; image?: { bytesBase64Encoded?: string; mimeType?: string; gcsUri?: string }; [field: string]: unknown }>;
  parameters?: { aspectRatio?: string; durationSeconds?: number; resolution?: string; sampleCount?: number; [field: string]: unknown };
}

const MODELS = ["veo-3.1-generate-preview", "veo-3.1-fast-generate-preview", "veo-3.0-generate-001", "veo-3.0-fast-generate-001", "veo-2.0-generate-001"];
/** Parameters the Gemini API refuses for Veo (Vertex only), as the SDK's mapping records. */
const VERTEX_ONLY = ["seed", "generateAudio", "fps", "storageUri", "pubsubTopic", "compressionQuality", "resizeMode", "labels"];

const googleError = (code: number, status: string, message: string, reason?: string) => ({
  error: { code, message, status, ...(reason ? { details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "googleapis.com" }] } : {}) },
});

export class VeoUpstream extends FakeVendor<VeoCreateRequest> {
  protected readonly basePath = "";
  /** Video downloads refused for a missing or wrong key. */
  keylessDownloads = 0;
  private stringErrors = false;

  constructor(private readonly apiKey: string) {
    super();
  }

  protected promptOf(body: VeoCreateRequest): string {
    return body.instances?.[0]?.prompt ?? "";
  }

  protected internalError(): [number, unknown] {
    return [500, googleError(500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")];
  }

  private keyOf(req: IncomingMessage, url: URL): string | undefined {
    const header = req.headers["x-goog-api-key"];
    return (Array.isArray(header) ? header[0] : header) ?? url.searchParams.get("key") ?? undefined;
  }

  protected override downloadAllowed(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.keyOf(req, new URL(req.url ?? "/", "http://fake")) === this.apiKey) return true;
    this.keylessDownloads++;
    this.send(res, 403, googleError(403, "PERMISSION_DENIED", "The caller does not have permission"));
    return false;
  }

  protected handle(req: IncomingMessage, url: URL, text: string, res: ServerResponse): void {
    const key = this.keyOf(req, url);
    if (key === undefined) return this.send(res, 403, googleError(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."));
    if (key !== this.apiKey) return this.send(res, 400, googleError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", "API_KEY_INVALID"));
    const create = /^\/v1beta\/models\/([^/:]+):predictLongRunning$/.exec(url.pathname);
    if (create && req.method === "POST") return this.create(decodeURIComponent(create[1] ?? ""), text, res);
    const poll = /^\/v1beta\/(models\/[^/]+\/operations\/[^/]+)$/.exec(url.pathname);
    if (poll && req.method === "GET") return this.query(decodeURIComponent(poll[1] ?? ""), res);
    this.send(res, 404, googleError(404, "NOT_FOUND", `Requested entity was not found: ${url.pathname}`));
  }

  private create(model: string, text: string, res: ServerResponse): void {
    const body = parseJson(text) as VeoCreateRequest | undefined;
    if (typeof body !== "object" || body === null) return this.send(res, 400, googleError(400, "INVALID_ARGUMENT", "Invalid JSON payload received."));
    this.createBodies.push(body);
    if (!MODELS.includes(model)) return this.send(res, 404, googleError(404, "NOT_FOUND", `models/${model} is not found for API version v1beta, or is not supported for predictLongRunning.`));
    const invalid = validate(body);
    if (invalid) return this.send(res, 400, googleError(400, "INVALID_ARGUMENT", invalid));
    const trouble = this.createTrouble(this.promptOf(body));
    switch (trouble) {
      case "quota":
        return this.send(res, 400, googleError(400, "FAILED_PRECONDITION", "Gemini API free tier is not available for this model. Please enable billing on your project."));
      case "moderation":
        return this.send(res, 400, googleError(400, "INVALID_ARGUMENT", "The prompt could not be submitted. This prompt contains words that violate the usage guidelines."));
      case "429":
        return this.send(res, 429, googleError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."));
      case "500":
        return this.send(res, ...this.internalError());
      default: {
        const task = this.createTask(body, `models/${model}/operations/${randomBytes(6).toString("hex")}`);
        if (trouble === "loseAnswer") return void res.destroy();
        this.send(res, 200, { name: task.id });
      }
    }
  }

  private query(name: string, res: ServerResponse): void {
    const task = this.tasks.get(name);
    if (!task) return this.send(res, 404, googleError(404, "NOT_FOUND", "Requested entity was not found."));
    const trouble = this.pollTrouble(task);
    if (trouble === "429") return this.send(res, 429, googleError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."));
    if (trouble === "500") return this.send(res, ...this.internalError());
    this.advance(task);
    this.send(res, 200, this.view(task));
  }

  private view(task: FakeTask<VeoCreateRequest>): unknown {
    const type = "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse";
    switch (task.status) {
      case "queued":
        return { name: task.id };
      case "running":
      case "odd":
        return { name: task.id, done: false, metadata: {} };
      case "failed":
      case "cancelled": {
        this.stringErrors = !this.stringErrors;
        const message = "Video generation failed due to an internal problem with the model.";
        return { name: task.id, done: true, error: this.stringErrors ? message : { code: 13, message } };
      }
      case "moderated":
        return {
          name: task.id,
          done: true,
          response: { "@type": type, generateVideoResponse: { raiMediaFilteredCount: 1, raiMediaFilteredReasons: ["The video could not be generated because it violates our policies."] } },
        };
      case "noVideo":
        return { name: task.id, done: true, response: { "@type": type, generateVideoResponse: {} } };
      case "succeeded": {
        const uri = this.resultUrl(task).replace(/\?.*$/, "");
        return { name: task.id, done: true, response: { "@type": type, generateVideoResponse: { generatedSamples: [{ video: { uri: `${uri}?alt=media` } }] } } };
      }
    }
  }
}

/** The Gemini API's checks as far as the vendors doc records them (D.1). */
function validate(body: VeoCreateRequest): string | undefined {
  const instance = body.instances?.[0];
  if (!instance || body.instances?.length !== 1) return "instances must hold exactly one instance.";
  if (typeof instance.prompt !== "string" || instance.prompt === "") return "instances[0].prompt is required.";
  if (instance.image) {
    if (instance.image.gcsUri) return "gcsUri is not supported on the Gemini API; send bytesBase64Encoded.";
    if (typeof instance.image.bytesBase64Encoded !== "string" || !/^(image\/png|image\/jpeg|image\/webp)$/.test(instance.image.mimeType ?? "")) {
      return "instances[0].image needs bytesBase64Encoded and a mimeType of image/png, image/jpeg or image/webp.";
    }
  }
  const parameters = body.parameters ?? {};
  for (const key of VERTEX_ONLY) if (key in parameters) return `${key} parameter is not supported in Gemini API.`;
  if (parameters.aspectRatio !== undefined && !["16:9", "9:16"].includes(parameters.aspectRatio)) return "aspectRatio must be 16:9 or 9:16.";
  if (parameters.durationSeconds !== undefined && ![4, 6, 8].includes(parameters.durationSeconds)) return "durationSeconds must be 4, 6 or 8.";
  if (parameters.resolution !== undefined && !["720p", "1080p", "4k"].includes(parameters.resolution)) return "resolution must be 720p, 1080p or 4k.";
  if (parameters.sampleCount !== undefined && !(Number.isInteger(parameters.sampleCount) && parameters.sampleCount >= 1 && parameters.sampleCount <= 4)) {
    return "sampleCount must be between 1 and 4.";
  }
  return undefined;
}
