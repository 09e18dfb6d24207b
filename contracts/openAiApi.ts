import { z } from "zod";
import { ChatRequestEnvelope } from "./chat.ts";
import { routeContract } from "./httpRoute.ts";
import { CreateHeaders, integerParam } from "./videoApi.ts";
import { shownInput } from "./shownInput.ts";

/**
 * The OpenAI-shaped API reelay serves under each OpenAI base (`/v1`, `/api/compat`): chat completions, the
 * model list and OpenAI's Videos API, in the shapes openai-node's types give them (docs/api.md).
 */

/**
 * Where the OpenAI-shaped API is served: under the spec's `/api/compat`, and at `/v1`, the path every OpenAI
 * SDK default and OpenAI-speaking gateway appends or expects (new-api's video channels always append
 * `/v1/videos…` to a base URL; many tools require a base URL ending in `/v1`). The same handlers answer both.
 */
export const OPENAI_BASES = ["/api/compat", "/v1"] as const;


/** The error body every OpenAI client library understands; `type` and `code` follow OpenAI's values. */
export const OpenAiErrorBody = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }),
});
export type OpenAIErrorBody = z.infer<typeof OpenAiErrorBody>;

/** One entry of `GET /models`. */
export const ModelEntry = z.object({ id: z.string(), object: z.literal("model"), created: z.number().int(), owned_by: z.string() });
export type ModelEntry = z.infer<typeof ModelEntry>;
export const ModelList = z.object({ object: z.literal("list"), data: z.array(ModelEntry) });

/** A chat completion as relayed (the upstream's own fields pass through). */
export const ChatCompletion = z.looseObject({
  id: z.string(),
  object: z.literal("chat.completion"),
  model: z.string(),
  choices: z.array(z.looseObject({ index: z.number().int(), message: z.looseObject({ role: z.string(), content: z.string().nullable() }) })),
});

/** A task as the OpenAI Videos API shows it (its `Video` object, as openai-node's `resources/videos.ts` types it). */
export const OpenAiVideo = z.object({
  id: z.string().describe("video_<task_id>"),
  object: z.literal("video"),
  status: z.enum(["queued", "in_progress", "completed", "failed"]),
  progress: z.number().int().min(0).max(100),
  model: z.string(),
  prompt: z.string().nullable(),
  seconds: z.string(),
  size: z.string(),
  created_at: z.number().int(),
  completed_at: z.number().int().nullable(),
  expires_at: z.number().int().nullable(),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  remixed_from_video_id: z.string().nullable(),
});
export type OpenAiVideo = z.infer<typeof OpenAiVideo>;
export const OpenAiVideoList = z.object({
  object: z.literal("list"),
  data: z.array(OpenAiVideo),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});
export const OpenAiVideoDeleted = z.object({ id: z.string(), object: z.literal("video.deleted"), deleted: z.literal(true) });

/** The create's form, as every SDK sends it (multipart) or as JSON; read by services/edge/openaiVideos/createForm.ts. */
export const VideoCreateForm = z.object({
  model: z.string(),
  prompt: z.string(),
  seconds: z.string().optional().describe('whole seconds, such as "8", within the model\'s bounds'),
  size: z.string().optional().describe("1280x720, 720x1280, 960x960, 1112x834, 834x1112 or 1470x630"),
  input_reference: z.string().optional().describe("a PNG, JPEG, GIF or WebP file (at most 10 MiB), the first frame"),
});
export const VideoCreateJson = VideoCreateForm.extend({
  seconds: z.union([z.string(), z.number().int()]).optional(),
  input_reference: z.object({ image_url: z.string().optional(), file_id: z.string().optional() }).optional(),
});
export const RemixBody = z.object({ prompt: z.string(), model: z.string().optional().describe("only the source's own model") });

export const VideoListQuery = z.object({
  limit: integerParam("limit", 1, 100, 20),
  order: z
    .enum(["asc", "desc"], { error: (issue) => `order must be asc or desc, got "${shownInput(issue.input, 20)}"` })
    .default("desc")
    .describe("desc (newest first, the default) or asc"),
  after: z.string().optional().describe("a video id: the page after it"),
});
export const VideoContentQuery = z.object({
  variant: z
    .enum(["video", "thumbnail", "spritesheet"], { error: (issue) => `variant must be video, thumbnail or spritesheet, got "${shownInput(issue.input, 30)}"` })
    .default("video")
    .describe("video (MP4, the default), thumbnail (WebP) or spritesheet (JPEG)"),
});

const video = { description: "the video object", schema: OpenAiVideo };
const chatStream = "Server-Sent Events of `chat.completion.chunk` objects, ending with `data: [DONE]`";

export const OPENAI_API = {
  chat: routeContract({
    method: "POST",
    path: "/chat/completions",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "A chat completion, relayed to the model's upstream (streamed with `stream: true`)",
    auth: true,
    body: { "application/json": ChatRequestEnvelope },
    responses: { 200: { description: `the completion (with stream: true, ${chatStream})`, schema: ChatCompletion } },
  }),
  models: routeContract({
    method: "GET",
    path: "/models",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "The chat and video models",
    auth: true,
    responses: { 200: { description: "the models", schema: ModelList } },
  }),
  model: routeContract({
    method: "GET",
    path: "/models/{model}",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "One model (its id may hold slashes)",
    auth: true,
    responses: { 200: { description: "the model", schema: ModelEntry } },
  }),
  createVideo: routeContract({
    method: "POST",
    path: "/videos",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "Create a video: a task on the spec's path, shown as OpenAI's video object",
    auth: true,
    headers: CreateHeaders,
    body: { "multipart/form-data": VideoCreateForm, "application/json": VideoCreateJson },
    responses: { 200: video },
  }),
  listVideos: routeContract({
    method: "GET",
    path: "/videos",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "The caller's videos, a cursor page at a time",
    auth: true,
    query: VideoListQuery,
    responses: { 200: { description: "a page of videos", schema: OpenAiVideoList } },
  }),
  retrieveVideo: routeContract({
    method: "GET",
    path: "/videos/{id}",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "One video",
    auth: true,
    responses: { 200: video },
  }),
  videoContent: routeContract({
    method: "GET",
    path: "/videos/{id}/content",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "A completed video's MP4, thumbnail or spritesheet (Range honoured)",
    auth: true,
    query: VideoContentQuery,
    responses: { 200: { description: "the bytes", contentType: "application/octet-stream" }, 206: { description: "the requested range", contentType: "application/octet-stream" } },
  }),
  deleteVideo: routeContract({
    method: "DELETE",
    path: "/videos/{id}",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "Delete a finished video's files (the task, its events and charges stay)",
    auth: true,
    responses: { 200: { description: "deleted", schema: OpenAiVideoDeleted } },
  }),
  remixVideo: routeContract({
    method: "POST",
    path: "/videos/{id}/remix",
    family: "openai",
    bases: OPENAI_BASES,
    summary: "A new video from a completed one and a new prompt (same model, duration and size)",
    auth: true,
    headers: CreateHeaders,
    body: { "application/json": RemixBody, "multipart/form-data": RemixBody },
    responses: { 200: video },
  }),
} as const;

/** The spec's own path for chat completions (design.md): the OpenAI handler, outside the OpenAI bases. */
export const SPEC_CHAT = routeContract({ ...OPENAI_API.chat, bases: undefined, path: "/api/compat/chatCompletions", summary: "Chat completions at the spec's path (the same as POST /chat/completions)" });
