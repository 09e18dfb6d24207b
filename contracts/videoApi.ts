import { z } from "zod";
import { routeContract } from "./httpRoute.ts";
import { CreateVideoRequest, TaskStatus } from "./videoTask.ts";
import { shownInput } from "./shownInput.ts";

/**
 * The spec's video API (`/api/compat/videos…`, design.md and docs/api.md): its envelope, queries and
 * answers, and the task's files. Query parameters arrive as strings; these schemas parse them and their
 * messages are the 400s clients read.
 */

const TASK_ID = /^[1-9][0-9]{0,14}$/;

/** An integer parameter sent as text (`Number` reads it, as `limit=1e1` always was), within bounds. */
export const integerParam = (name: string, min: number, max: number, fallback: number) =>
  z
    .string()
    .default(String(fallback))
    .refine(
      (text) => {
        const value = Number(text);
        return Number.isInteger(value) && value >= min && value <= max;
      },
      { error: (issue) => `${name} must be an integer from ${min} to ${max}, got "${shownInput(issue.input, 20)}"` },
    )
    .transform(Number)
    .describe(`an integer from ${min} to ${max} (default ${fallback})`);

/** Said by the task's query and its event stream alike: the words name the parameter, not one of the two paths. */
const TASK_ID_REQUIRED = "id is required: ?id=<task_id>, the task_id the create answered";
const TaskIdParam = z
  .string({ error: TASK_ID_REQUIRED })
  .min(1, { error: TASK_ID_REQUIRED, abort: true })
  .regex(TASK_ID, { error: (issue) => `id must be a positive integer task id, got "${shownInput(issue.input, 40)}"` })
  .transform(Number)
  .describe("the task_id the create answered");

export const TaskIdQuery = z.object({ id: TaskIdParam });

export const TaskListQuery = z.object({
  limit: integerParam("limit", 1, 100, 20),
  before: z
    .string()
    .regex(TASK_ID, { error: (issue) => `before must be a task id, got "${shownInput(issue.input, 20)}"` })
    .transform(Number)
    .optional()
    .describe("a task id: the page after `next_before`"),
  status: z
    .enum(TaskStatus.options, { error: (issue) => `status must be one of ${TaskStatus.options.join(", ")}, got "${shownInput(issue.input, 20)}"` })
    .optional()
    .describe("only tasks in this status"),
});

/** `Last-Event-ID`: where a reconnecting event stream resumes (the id of the last event it got). */
export const EventStreamHeaders = z.object({
  "last-event-id": z
    .string()
    .regex(/^[1-9][0-9]{0,15}$/, { error: (issue) => `Last-Event-ID must be an event id this stream sent (a positive integer), got "${shownInput(issue.input, 40)}"` })
    .transform(Number)
    .optional(),
});

export const CreateHeaders = z.object({
  "idempotency-key": z.string().max(255, "Idempotency-Key must be at most 255 characters").optional().describe("a retry with the same key answers the same task"),
});

/** The spec's envelope around an error: HTTP status = `code`. */
export const SpecError = z.object({ code: z.number().int(), msg: z.string() });

/** A task as customers see it: the query's `data` (and each task of the list, webhooks, event streams). */
export const TaskData = z.union([
  z.object({ task_id: z.number().int(), status: z.enum(["pending", "running"]), provider_task_id: z.string().optional() }),
  z.object({
    task_id: z.number().int(),
    status: z.literal("success"),
    provider_task_id: z.string().optional(),
    video_url: z.string().optional(),
    duration: z.number().int().optional(),
    resolution: z.string().optional().describe("<width>*<height>"),
    total_tokens: z.number().int().optional(),
    cost: z.number().optional().describe("yuan"),
  }),
  z.object({ task_id: z.number().int(), status: z.literal("failed"), msg: z.string() }),
]);
export type TaskData = z.infer<typeof TaskData>;

export const CreateAnswer = z.object({
  code: z.literal(200),
  msg: z.literal("success"),
  data: z.object({ task_id: z.number().int(), provider_task_id: z.string().optional(), status: TaskStatus }),
});
export const QueryAnswer = z.object({ code: z.literal(200), msg: TaskStatus.describe("the task's status"), data: TaskData });
export const TaskListAnswer = z.object({
  code: z.literal(200),
  msg: z.literal("success"),
  data: z.object({ tasks: z.array(TaskData), next_before: z.number().int().nullable() }),
});
export const HealthAnswer = z.object({ status: z.string().describe('"ok", or what keeps this edge from answering correctly') });
/** A vendor's callback: its own JSON (Ark's task object; Kling's and MiniMax's `task_id`), or MiniMax's `{"challenge"}`. */
export const UpstreamCallback = z.looseObject({});
export const UpstreamCallbackAnswer = z.object({ challenge: z.string().optional() });

const eventStream = { description: "Server-Sent Events: `id`, `event: status`, `data:` the task as the query shows it", contentType: "text/event-stream" };
const bytes = (what: string) => ({ description: what, contentType: "application/octet-stream" });

export const VIDEO_API = {
  create: routeContract({
    method: "POST",
    path: "/api/compat/videosGenerations",
    family: "spec",
    summary: "Create a video task; answers its task_id (and the upstream's id when it accepted within the wait)",
    auth: true,
    headers: CreateHeaders,
    body: { "application/json": CreateVideoRequest },
    responses: { 200: { description: "the task was created", schema: CreateAnswer } },
  }),
  query: routeContract({
    method: "GET",
    path: "/api/compat/videosTask",
    family: "spec",
    summary: "A task's status; its video's address once it succeeded (a failed task answers 500 with the reason)",
    auth: true,
    query: TaskIdQuery,
    responses: { 200: { description: "the task (msg is its status)", schema: QueryAnswer } },
  }),
  list: routeContract({
    method: "GET",
    path: "/api/compat/videosTasks",
    family: "spec",
    summary: "The caller's tasks, newest first",
    auth: true,
    query: TaskListQuery,
    responses: { 200: { description: "a page of tasks; next_before names the next page", schema: TaskListAnswer } },
  }),
  taskEvents: routeContract({
    method: "GET",
    path: "/api/compat/videosTask/events",
    family: "spec",
    summary: "One task's status changes as Server-Sent Events, ending after its final state",
    auth: true,
    query: TaskIdQuery,
    headers: EventStreamHeaders,
    responses: { 200: eventStream, 204: { description: "nothing more will come (the task ended before the resumed id)", contentType: "text/plain" } },
  }),
  accountEvents: routeContract({
    method: "GET",
    path: "/api/compat/videosTasks/events",
    family: "spec",
    summary: "Status changes of every task of the caller's account, as Server-Sent Events",
    auth: true,
    headers: EventStreamHeaders,
    responses: { 200: eventStream },
  }),
  video: routeContract({
    method: "GET",
    path: "/videos/{name}",
    family: "spec",
    summary: "A generated video (the address is the capability: no key); Range and If-None-Match are honoured",
    auth: false,
    responses: { 200: bytes("the video (video/mp4)"), 206: bytes("the requested range"), 304: { description: "the client's copy is current" }, 416: { description: "the range is outside the file" } },
  }),
  reference: routeContract({
    method: "GET",
    path: "/references/{name}",
    family: "spec",
    summary: "An uploaded reference image, while its task needs it (the address is the capability)",
    auth: false,
    responses: { 200: bytes("the image"), 206: bytes("the requested range"), 304: { description: "the client's copy is current" }, 416: { description: "the range is outside the file" } },
  }),
  upstreamCallback: routeContract({
    method: "POST",
    path: "/hooks/upstream/{channel}",
    family: "spec",
    summary: "A vendor's callback that one of its tasks changed: the task's runner asks the vendor now (nothing in it is trusted)",
    auth: false,
    body: { "application/json": UpstreamCallback },
    responses: { 200: { description: "taken (MiniMax's challenge is echoed)", schema: UpstreamCallbackAnswer } },
  }),
  health: routeContract({
    method: "GET",
    path: "/healthz",
    family: "spec",
    summary: "Whether this edge can answer correctly (NATS connected, its mirrors and task feed live)",
    auth: false,
    responses: { 200: { description: "healthy", schema: HealthAnswer }, 503: { description: "what is wrong", schema: HealthAnswer } },
  }),
  metrics: routeContract({
    method: "GET",
    path: "/metrics",
    family: "spec",
    summary: "Prometheus metrics, for clients on this machine only (elsewhere 404; REELAY_METRICS_PORT serves other networks)",
    auth: false,
    responses: { 200: { description: "the Prometheus text format", contentType: "text/plain" } },
  }),
  openApi: routeContract({
    method: "GET",
    path: "/openapi.json",
    family: "spec",
    summary: "This document",
    auth: false,
    responses: { 200: { description: "OpenAPI 3.1", schema: z.looseObject({ openapi: z.string() }) } },
  }),
} as const;
