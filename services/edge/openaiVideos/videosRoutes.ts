import type { JetStreamManager } from "@nats-io/jetstream";
import type { ObjectStore } from "@nats-io/obj";
import type { ReelayConfig } from "../../../contracts/config.ts";
import type { TaskView } from "../../../contracts/videoTask.ts";
import { NotFoundError, ReelayError, ValidationError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { listAccountTasks } from "../../tasks/taskIndex.ts";
import type { ApiKeyDirectory } from "../auth.ts";
import { jsonReply, type HttpReply } from "../http/reply.ts";
import type { RequestInfo } from "../http/request.ts";
import { decodePathSegment } from "../http/pathSegment.ts";
import { replyRoute, type TableRoute } from "../http/routeTable.ts";
import type { z } from "zod";
import { OPENAI_API, type OpenAiVideoDeleted, type OpenAiVideoList, type VideoListQuery } from "../../../contracts/openAiApi.ts";
import { createVideoTask, type CreateDeps } from "../video/createTask.ts";
import { validateIdempotencyKey } from "../video/idempotencyKeys.ts";
import { normalizeVideoRequest, type NormalizedVideoRequest } from "../video/normalizeRequest.ts";
import type { TaskViewReader } from "../video/taskViewReader.ts";
import { STILL_NAME, type VideoFiles } from "../video/videoFiles.ts";
import { FFMPEG, locateProgram } from "../../../infra/binaries.ts";
import { decideTask, foldTask } from "../../../machines/videoTaskDecider.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import { makeStill, stillObjectName, type StillVariant } from "./videoVariants.ts";
import { SingleFlight } from "../../shared/singleFlight.ts";
import { Semaphore } from "../../shared/semaphore.ts";
import { usableProviders } from "../video/videoModelAvailability.ts";
import { readCreateForm, readRemixForm, SIZES, type VideoCreateForm } from "./createForm.ts";
import { checkReferenceImage, dropReferenceImage, keepReferenceImage, type ReferenceKeeping } from "./referenceImages.ts";
import { taskIdOfVideoId, videoIdOf, videoObjectOf } from "./videoObject.ts";

export interface VideosApiDeps {
  config: ReelayConfig;
  taskLog: TaskLog;
  keys: ApiKeyDirectory;
  create: CreateDeps;
  views: TaskViewReader;
  jsm: JetStreamManager;
  videos: ObjectStore;
  /** Where `input_reference` uploads are kept, and what may be kept (referenceImages.ts). */
  references: ReferenceKeeping;
  files: VideoFiles;
  baseUrl: (request: RequestInfo) => string;
  log: Logger;
}

/**
 * Stills made at once per edge. Each is made once per video and kept, but a tenant's burst over many videos of
 * its own started an ffmpeg for each at once (a spritesheet decodes the whole video), on the cores and memory
 * of an edge every tenant shares.
 */
const STILLS_AT_ONCE = 2;
/** Largest `input_reference`: what vendors take inline (Kling and DashScope 10 MB). */
export const MAX_INPUT_REFERENCE_BYTES = 10 * 1024 * 1024;

/**
 * OpenAI's Videos API under each OpenAI base, `/api/compat` and `/v1` (`client.videos.*` of the official
 * SDKs): the same tasks, ledger and events as the spec's endpoints, in OpenAI's shapes and errors.
 */
export function videosApiRoutes(deps: VideosApiDeps): TableRoute[] {
  const usable = usableProviders(deps.config, process.env, deps.log);
  const options = { now: 0, retentionDays: deps.config.videos.retentionDays };
  const objectOf = (view: TaskView) => videoObjectOf(view, { ...options, now: Date.now() });
  const limits = { maxFileBytes: MAX_INPUT_REFERENCE_BYTES, maxFieldBytes: deps.config.limits.maxPromptChars * 4 + 1024 };
  const owned = async (account: string, videoId: string): Promise<TaskView> => {
    const view = await deps.views.get(account, taskIdOfVideoId(videoId));
    // Another account's video answers exactly like a missing one, and so does a deleted one.
    if (!view || view.deletedAt !== undefined) throw new NotFoundError(`No video found with id '${videoId.slice(0, 100)}'.`, { param: "video_id", code: "video_not_found" });
    return view;
  };
  const create = (account: string, normalized: NormalizedVideoRequest, request: RequestInfo) => {
    const idempotencyKey = request.header("idempotency-key") || undefined;
    return createVideoTask(deps.create, account, normalized, idempotencyKey === undefined ? undefined : validateIdempotencyKey(idempotencyKey));
  };
  /** The `{id}` of `<base>/videos/{id}[/content|/remix]`: the segment after `videos` whatever the base. */
  const idOf = (request: RequestInfo, after: "" | "/content" | "/remix") => {
    const segments = request.url.split("/");
    return decodePathSegment(segments.at(after === "" ? -1 : -2) ?? "", "the video id");
  };

  const createRoute = replyRoute(
    OPENAI_API.createVideo,
    ({ request, body }) =>
      deps.keys.withAccount(request.header("authorization"), async (key) => {
        const form = await readCreateForm(request.header("content-type"), body ?? Buffer.alloc(0), limits);
        const upload = form.inputReference ? checkReferenceImage(form.inputReference) : undefined;
        const imageUrl = upload ? `${deps.baseUrl(request)}/references/${upload.name}` : form.inputReferenceUrl;
        const normalized = normalize(form, imageUrl);
        // Stored last, and only when the model takes it: a request refused for its model, capabilities, balance
        // or quota stores nothing (issue 32).
        const used = upload && normalized.job.references.image_url === imageUrl ? upload : undefined;
        if (used) {
          normalized.job.uploadedReference = used.name;
          await keepReferenceImage(deps.references, key.account, used, normalized.job);
        }
        const task = await create(key.account, normalized, request).catch(async (error: unknown) => {
          // Refused (4xx): no task has it. After a 503 the task may exist, so its reference stays (its end releases it).
          if (used && error instanceof ReelayError && error.status < 500) await dropReferenceImage(deps.references, key.account, used.name);
          throw error;
        });
        const view = (await deps.views.get(key.account, task.taskId)) ?? createdView(task.taskId, task.status, key.account, normalized);
        return jsonReply(200, objectOf(view));
      }),
    { maxBodyBytes: MAX_INPUT_REFERENCE_BYTES + limits.maxFieldBytes * 4 + 16 * 1024 },
  );

  const retrieveRoute = replyRoute(OPENAI_API.retrieveVideo, ({ request }) =>
    deps.keys.withAccount(request.header("authorization"), async (key) => jsonReply(200, objectOf(await owned(key.account, idOf(request, ""))))),
  );

  const listRoute = replyRoute(
    OPENAI_API.listVideos,
    (call) =>
      deps.keys.withAccount(call.request.header("authorization"), async (key) => {
        const query = listQueryOf(call.query);
        const { views, more } = await listAccountTasks(deps.jsm, key.account, query, (id) => deps.views.get(key.account, id));
        const data = views.map(objectOf);
        const page: z.input<typeof OpenAiVideoList> = { object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: more };
        return jsonReply(200, page);
      }),
  );

  const contentRoute = replyRoute(
    OPENAI_API.videoContent,
    (call) =>
      deps.keys.withAccount(call.request.header("authorization"), async (key) => {
        const { request } = call;
        const view = await owned(key.account, idOf(request, "/content"));
        const { variant } = call.query;
        if (view.status !== "success" || !view.video) throw new NotFoundError(`Video '${videoIdOf(view.taskId)}' has no content: it is ${objectOf(view).status}.`, { code: "video_not_ready" });
        if (variant === "video") return deps.files.serve(view.video.object, request.header("range"));
        return serveStill(variant, view.video.object, request.header("range"));
      }),
  );

  const deleteRoute = replyRoute(
    OPENAI_API.deleteVideo,
    ({ request }) =>
      deps.keys.withAccount(request.header("authorization"), async (key) => {
        const videoId = idOf(request, "");
        const view = await owned(key.account, videoId);
        if (view.status === "pending" || view.status === "running") {
          throw new ValidationError(`Video '${videoId}' is ${objectOf(view).status}; only a completed or failed video can be deleted.`, { code: "video_not_finished" });
        }
        const objects = view.video ? [view.video.object, stillObjectName("thumbnail", view.video.object), stillObjectName("spritesheet", view.video.object)] : [];
        const history = await deps.taskLog.read(key.account, view.taskId);
        const state = foldTask(history.events);
        const [event] = decideTask({ type: "DeleteVideo", objects }, state);
        // Deleted meanwhile (another request, another edge): the same answer as for any deleted video.
        if (event === undefined) throw new NotFoundError(`No video found with id '${videoId}'.`, { param: "video_id", code: "video_not_found" });
        await deps.taskLog.append(key.account, view.taskId, event, state.version + 1, history.lastSequence);
        // The event is the record; the files go after it (one left behind ages out with the store's max age).
        for (const name of objects) {
          deps.files.forget(name);
          await deps.videos.delete(name).catch((error: unknown) => deps.log.warn({ err: error, name }, "could not delete a stored file of a deleted video"));
        }
        const deleted: z.input<typeof OpenAiVideoDeleted> = { id: videoId, object: "video.deleted", deleted: true };
        return jsonReply(200, deleted);
      }),
  );

  const remixRoute = replyRoute(
    OPENAI_API.remixVideo,
    ({ request, body }) =>
      deps.keys.withAccount(request.header("authorization"), async (key) => {
        const videoId = idOf(request, "/remix");
        const source = await owned(key.account, videoId);
        const { prompt, model: named } = await readRemixForm(request.header("content-type"), body ?? Buffer.alloc(0), limits);
        // A remix keeps its source's model; naming it again is harmless, naming another is a mistake worth saying.
        if (named !== undefined && named !== source.model) throw new ValidationError(`a remix keeps the model of '${videoId}' (${source.model}); got model "${named.slice(0, 100)}"`, { param: "model" });
        const model = deps.config.videoModels[source.model];
        if (!model?.capabilities.includes("video")) {
          throw new ValidationError(`model ${source.model} does not take a video reference, so '${videoId}' cannot be remixed; create a new video instead`, { code: "remix_not_supported" });
        }
        if (source.status !== "success" || !source.video) throw new ValidationError(`Video '${videoId}' is ${objectOf(source).status}; only a completed video can be remixed.`, { code: "video_not_ready" });
        const size = `${source.width ?? 1280}x${source.height ?? 720}`;
        const form: VideoCreateForm = { model: source.model, prompt, seconds: source.durationSeconds ?? source.requestedSeconds ?? model.defaultDurationSeconds, ...(size in SIZES ? { size } : {}) };
        const normalized = normalize(form, undefined, `${deps.baseUrl(request)}/videos/${encodeURIComponent(source.video.object)}`);
        normalized.job.remixOf = source.taskId;
        const task = await create(key.account, normalized, request);
        return jsonReply(200, objectOf((await deps.views.get(key.account, task.taskId)) ?? createdView(task.taskId, task.status, key.account, normalized)));
      }),
    { maxBodyBytes: limits.maxFieldBytes * 2 },
  );

  const routes = [...createRoute, ...retrieveRoute, ...listRoute, ...contentRoute, ...deleteRoute, ...remixRoute];

  let ffmpeg: string | undefined;
  const stillsInTheMaking = new SingleFlight<void>();
  const ffmpegsAtOnce = new Semaphore(STILLS_AT_ONCE);
  /** A thumbnail or spritesheet: made once with ffmpeg from the stored video (one at a time per still, STILLS_AT_ONCE in all), then kept beside it. */
  async function serveStill(variant: StillVariant, videoObject: string, range: string): Promise<HttpReply> {
    const name = stillObjectName(variant, videoObject);
    try {
      return await deps.files.serve(name, range, STILL_NAME);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
    await stillsInTheMaking.run(name, async () => {
      const program = (ffmpeg ??= locateProgram(FFMPEG, (line) => deps.log.info(line)));
      const still = await ffmpegsAtOnce.run(() => makeStill(program, variant, (input) => deps.files.copyTo(videoObject, input)));
      await deps.videos.putBlob({ name, description: variant }, still);
    });
    return deps.files.serve(name, range, STILL_NAME);
  }

  function normalize(form: VideoCreateForm, imageUrl: string | undefined, videoUrl?: string): NormalizedVideoRequest {
    const body = {
      model: form.model,
      prompt: form.prompt,
      ...(form.seconds === undefined ? {} : { duration: form.seconds }),
      ...(form.size === undefined ? {} : { ratio: SIZES[form.size] }),
      ...(imageUrl === undefined ? {} : { image_url: imageUrl }),
      ...(videoUrl === undefined ? {} : { video_url: videoUrl }),
    };
    return normalizeVideoRequest(body, deps.config, usable);
  }
  return routes;
}

/** The view of a task just created, before the projection has it. */
function createdView(taskId: number, status: TaskView["status"], account: string, request: NormalizedVideoRequest): TaskView {
  const now = new Date().toISOString();
  const { job } = request;
  return {
    taskId,
    account,
    model: job.model,
    status,
    pricePerMillionTokens: job.pricePerMillionTokens,
    prompt: job.prompt,
    requestedSeconds: job.durationSeconds,
    width: job.width,
    height: job.height,
    ...(job.remixOf === undefined ? {} : { remixOf: job.remixOf }),
    createdAt: now,
    updatedAt: now,
    version: 0,
  };
}

/** OpenAI's list query as the index reads it: `after` (a video id) is the cursor, `order` its direction. */
function listQueryOf(query: z.output<typeof VideoListQuery>): { limit: number; before?: number; after?: number; ascending: boolean } {
  const cursor = query.after === undefined ? undefined : taskIdOfVideoId(query.after);
  const ascending = query.order === "asc";
  return { limit: query.limit, ascending, ...(cursor === undefined ? {} : ascending ? { after: cursor } : { before: cursor }) };
}
