import { z } from "zod";
import { RATIOS } from "./config.ts";

/** The longest http(s) reference address (the longest a browser or proxy takes; a vendor's signed URL is far shorter). */
export const MAX_REFERENCE_URL_CHARS = 2048;
/**
 * The longest `data:` reference (about 768 KB of image, as much as the spec's create takes in all): it travels
 * inside the task's first event, which every reader of the log then carries (a reactor's pull of 512 events, the
 * edge's feed), and which must fit nats-server's message limit. Larger images go as an upload (OpenAI's
 * multipart `input_reference`, stored beside the task) or an address.
 */
export const MAX_DATA_URL_CHARS = 1024 * 1024;

/** Body of POST /api/compat/videosGenerations, exactly as the spec lists it; unknown fields are refused. */
export const CreateVideoRequest = z.strictObject({
  model: z.string({ error: "model is required and must be a string" }).min(1, "model must not be empty"),
  prompt: z
    .string({ error: "prompt is required and must be a string" })
    .refine((p) => p.trim().length > 0, "prompt must not be empty"),
  image_url: z.string({ error: "image_url must be a string URL" }).refine(isFetchableUrl, `image_url must be an http(s) or data: URL (at most ${MAX_REFERENCE_URL_CHARS} characters, ${MAX_DATA_URL_CHARS} for a data: URL)`).optional(),
  video_url: z.string({ error: "video_url must be a string URL" }).refine(isFetchableUrl, `video_url must be an http(s) or data: URL (at most ${MAX_REFERENCE_URL_CHARS} characters, ${MAX_DATA_URL_CHARS} for a data: URL)`).optional(),
  audio_url: z.string({ error: "audio_url must be a string URL" }).refine(isFetchableUrl, `audio_url must be an http(s) or data: URL (at most ${MAX_REFERENCE_URL_CHARS} characters, ${MAX_DATA_URL_CHARS} for a data: URL)`).optional(),
  duration: z.number({ error: "duration must be an integer number of seconds" }).int("duration must be an integer number of seconds").optional(),
  ratio: z.enum(RATIOS, { error: `ratio must be one of ${RATIOS.join(", ")}` }).default("16:9"),
  resolution: z.literal("720p", { error: "resolution must be 720p (the only supported value)" }).default("720p"),
  generate_audio: z.boolean({ error: "generate_audio must be a boolean" }).default(true),
  watermark: z.boolean({ error: "watermark must be a boolean" }).default(false),
  /** Additive: each status change of the task is POSTed here, signed (Standard Webhooks). */
  callback_url: z
    .string({ error: "callback_url must be a string URL" })
    .max(2048, "callback_url must be at most 2048 characters")
    .refine(isCallbackUrl, "callback_url must be an http(s) URL without user name, password, spaces or control characters")
    .optional(),
});
export type CreateVideoRequest = z.infer<typeof CreateVideoRequest>;

function isFetchableUrl(value: string): boolean {
  if (value.startsWith("data:")) return value.length <= MAX_DATA_URL_CHARS;
  if (value.length > MAX_REFERENCE_URL_CHARS) return false;
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

/** Spaces and control characters, which the URL parser drops around (and tabs and newlines inside) a URL. */
const BLANKS = /[\s\x00-\x1f\x7f]/;

function isCallbackUrl(value: string): boolean {
  // Refused rather than cleaned up: what is stored and checked (https-only) must be exactly what is called.
  if (BLANKS.test(value)) return false;
  try {
    const url = new URL(value);
    return (url.protocol === "https:" || url.protocol === "http:") && url.username === "" && url.password === "";
  } catch {
    return false;
  }
}

export const REFERENCE_FIELDS = { image: "image_url", video: "video_url", audio: "audio_url" } as const;
export type ReferenceField = (typeof REFERENCE_FIELDS)[keyof typeof REFERENCE_FIELDS];

/** What a runner needs to generate one video: the request after config was applied. */
export const VideoJobSpec = z.object({
  model: z.string(),
  /** The model's (first) channel: the provider entry that runs the task when it has no other. */
  provider: z.string(),
  /** All of the model's channels when it has several (absent: `provider` alone). */
  channels: z.array(z.string()).min(1).optional(),
  prompt: z.string(),
  durationSeconds: z.number().int().positive(),
  ratio: z.enum(RATIOS),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  generateAudio: z.boolean(),
  watermark: z.boolean(),
  /** Yuan per 1,000,000 tokens when the task was created: the price it is settled at. */
  pricePerMillionTokens: z.number().positive(),
  /** design.md's estimate, reserved at create. */
  estimatedTokens: z.number().int().nonnegative(),
  references: z.object({
    image_url: z.string().optional(),
    video_url: z.string().optional(),
    audio_url: z.string().optional(),
  }),
  /** The task whose video this one remixes (OpenAI Videos API `remix`): that video is the video reference. */
  remixOf: z.number().int().positive().optional(),
  /** The `input_reference` upload this task uses (bucket `references`): removed when the task ends. */
  uploadedReference: z.string().optional(),
});
export type VideoJobSpec = z.infer<typeof VideoJobSpec>;



const EventMeta = z.object({
  schema: z.literal(1),
  taskId: z.number().int().positive(),
  /** Position of the event in its task's history, starting at 1. */
  version: z.number().int().positive(),
  at: z.string(),
});
export type TaskEventMeta = z.infer<typeof EventMeta>;

export const TaskSubmitted = z.object({
  type: z.literal("TaskSubmitted"),
  data: z.object({
    account: z.string(),
    job: VideoJobSpec,
    ignoredFields: z.array(z.string()),
    deadlineAt: z.string(),
    /**
     * Sent upstream with the submit where the upstream keeps one. Its presence is the intent to submit:
     * a runner that restores the task without an acceptance asks the upstream for it before submitting.
     */
    clientReference: z.string().optional(),
    /** The create's callback_url: the webhook dispatcher delivers the task's status changes there. */
    callbackUrl: z.string().optional(),
    /**
     * The create's Idempotency-Key (its hash, per account) and the request's fingerprint: a retry with the
     * same key answers this task, a different request with it is a conflict.
     */
    idempotency: z.object({ keyHash: z.string(), fingerprint: z.string() }).optional(),
  }),
  meta: EventMeta,
});
export type TaskSubmittedEvent = z.infer<typeof TaskSubmitted>;

/** What reelay sends upstream to name task N, where the upstream keeps such a reference (to find it again after a crash). */
export const clientReference = (taskId: number): string => `reelay-task-${taskId}`;

export const UpstreamAccepted = z.object({
  type: z.literal("UpstreamAccepted"),
  data: z.object({
    providerTaskId: z.string(),
    /** The provider entry (channel) that accepted the task: it is asked about the task from then on. */
    channel: z.string().optional(),
  }),
  meta: EventMeta,
});
/**
 * The upstream's acceptance again, on the event that directly follows it (the task's move out of pending: it
 * started, or ended first). The reactors do not read the acceptance (it is on the task's `upstream` subject),
 * so this is where they learn the upstream's id and channel, and that the event before this one they read is
 * two versions back (`versionBeforeForReactors`).
 */
export const AcceptanceCopy = z.object({ providerTaskId: z.string(), channel: z.string().optional() });
export type AcceptanceCopy = z.infer<typeof AcceptanceCopy>;

export const GenerationStarted = z.object({
  type: z.literal("GenerationStarted"),
  data: z.object({ accepted: AcceptanceCopy.optional() }),
  meta: EventMeta,
});
export const StoredVideo = z.object({
  /** Object-store name; served by the edge at /videos/<name>. */
  object: z.string(),
  bytes: z.number().int().nonnegative(),
  contentType: z.string(),
});
export type StoredVideo = z.infer<typeof StoredVideo>;
/**
 * What the upstream billed us in its own unit (Ark: tokens; DashScope, Kling, MiniMax, Veo: seconds of video),
 * and what that cost at the price configured when the task finished, so margins replay as they were.
 */
export const UpstreamUsage = z.object({
  unit: z.enum(["tokens", "seconds"]),
  amount: z.number().nonnegative(),
  costMicros: z.number().int().nonnegative().optional(),
});
export type UpstreamUsage = z.infer<typeof UpstreamUsage>;
export const GenerationSucceeded = z.object({
  type: z.literal("GenerationSucceeded"),
  data: z.object({
    video: StoredVideo,
    durationSeconds: z.number().int().positive(),
    resolution: z.string(),
    totalTokens: z.number().int().nonnegative(),
    /** What the upstream reported it used (absent: it reported nothing, and `totalTokens` is the estimate). */
    upstreamTokens: z.number().int().nonnegative().optional(),
    upstreamUsage: UpstreamUsage.optional(),
    accepted: AcceptanceCopy.optional(),
  }),
  meta: EventMeta,
});
export const FailureStage = z.enum(["submit", "generation", "timeout"]);
export const GenerationFailed = z.object({
  type: z.literal("GenerationFailed"),
  data: z.object({
    /** What the customer reads on the task. */
    reason: z.string(),
    stage: FailureStage,
    /** For operators only (tool output, network errors): never in the task view or any answer. */
    detail: z.string().optional(),
    accepted: AcceptanceCopy.optional(),
  }),
  meta: EventMeta,
});

/** How far the upstream says it is (0–100), for the upstreams that report it; recorded in steps (machines/videoTask.ts). */
export const GenerationProgressed = z.object({
  type: z.literal("GenerationProgressed"),
  data: z.object({ progress: z.number().int().min(0).max(100) }),
  meta: EventMeta,
});

/**
 * The customer deleted a finished task's video (OpenAI Videos API `DELETE /videos/{id}`): its stored files go,
 * the task's events and charges stay for audit.
 */
export const VideoDeleted = z.object({
  type: z.literal("VideoDeleted"),
  data: z.object({
    /** Object-store names removed with it (the video, and a thumbnail or spritesheet made from it). */
    objects: z.array(z.string()),
  }),
  meta: EventMeta,
});

export const TaskEvent = z.discriminatedUnion("type", [
  TaskSubmitted,
  UpstreamAccepted,
  GenerationStarted,
  GenerationSucceeded,
  GenerationFailed,
  GenerationProgressed,
  VideoDeleted,
]);
export type TaskEvent = z.infer<typeof TaskEvent>;
export type TaskEventType = TaskEvent["type"];
/** An event before it has a place in the log: the appender adds `meta`. */
export type NewTaskEvent = { [E in TaskEvent as E["type"]]: Omit<E, "meta"> }[TaskEventType];

export const TaskStatus = z.enum(["pending", "running", "success", "failed"]);
export type TaskStatus = z.infer<typeof TaskStatus>;

/** Read model behind GET videosTask: one document per task, folded from its events. */
export const TaskView = z.object({
  taskId: z.number().int(),
  account: z.string(),
  model: z.string(),
  status: TaskStatus,
  providerTaskId: z.string().optional(),
  video: StoredVideo.optional(),
  durationSeconds: z.number().int().optional(),
  resolution: z.string().optional(),
  totalTokens: z.number().int().optional(),
  /** Price at creation, so the success answer can state the cost with the ledger's arithmetic. */
  pricePerMillionTokens: z.number().positive(),
  costMicros: z.number().int().optional(),
  failureReason: z.string().optional(),
  /** What was asked (absent in views folded before they were kept): the OpenAI video object shows them. */
  prompt: z.string().optional(),
  requestedSeconds: z.number().int().optional(),
  width: z.number().int().optional(),
  height: z.number().int().optional(),
  remixOf: z.number().int().optional(),
  /** When the task ended (success or failure). */
  finishedAt: z.string().optional(),
  /** When its video was deleted (the task stays, for audit). */
  deletedAt: z.string().optional(),
  /** The upstream's progress (0–100), for upstreams that report it, and when it first did. */
  progress: z.number().int().optional(),
  progressSince: z.string().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  /** meta.version of the last event applied: makes the projection idempotent. */
  version: z.number().int(),
});
export type TaskView = z.infer<typeof TaskView>;

/**
 * Task N of account A lives in stream EVENTS under the account's prefix. Its opening (TaskSubmitted with the
 * reservation, written by the edge in one guarded publish: contracts/taskOpening.ts) is on
 * `acct.A.money.<epoch>.task.N`, among the account's money subjects (contracts/ledger.ts on epochs), so the write that starts a task is the write
 * that reserves its money. Every later event is on `acct.A.task.N.<kind>`, outside the money prefix, so a busy
 * account's running tasks never make its creates retry; each append is guarded by the last sequence over
 * `acct.A.task.N.*`, so the task's later events stay one fenced sequence whatever their kind:
 * - `state`: what the reactors read (status changes, results, deletion);
 * - `upstream`: the upstream's acceptance, which changes no status and which no reactor reads (its id and
 *   channel are copied onto the next event: AcceptanceCopy). One delivery less per task.
 * A task's read is one direct get of the last message of each of its subjects (an index lookup), and a
 * batch of its `state` subject only when it has more than one message there (services/shared/taskLog.ts).
 */
export const taskOpeningSubject = (account: string, taskId: number, epoch: number): string => `acct.${account}.money.${epoch}.task.${taskId}`;
/** Task N's opening, whatever the money epoch it was written in (`account` may be `*`): one subject per epoch to look at. */
export const taskOpeningFilter = (account: string, taskId: number): string => `acct.${account}.money.*.task.${taskId}`;
/** Whether a subject of the log is a task's opening. */
export const isTaskOpeningSubject = (subject: string): boolean => /^acct\.[^.]+\.money\.\d+\.task\.\d+$/.test(subject);
export type LaterEventKind = "state" | "upstream";
/** Which of a task's later subjects an event goes on. */
export const laterEventKind = (type: TaskEventType): LaterEventKind => (type === "UpstreamAccepted" ? "upstream" : "state");
/** Where a later event of task N of that kind is. */
export const taskEventsSubject = (account: string, taskId: number, kind: LaterEventKind): string => `acct.${account}.task.${taskId}.${kind}`;
/** Every later event of task N: what its appends are fenced on. */
export const taskLaterSubjects = (account: string, taskId: number): string => `acct.${account}.task.${taskId}.*`;
/** One account's openings (`*`: every account's), in every money epoch: its task list. */
export const accountOpenings = (account: string): string => `acct.${account}.money.*.task.*`;
/** Every task's opening: what runners consume. */
export const TASK_OPENINGS = accountOpenings("*");
/** Every task's later events the reactors read. */
export const TASK_STATE_EVENTS = "acct.*.task.*.state";
/** Every task's later events, of every kind. */
export const TASK_LATER_EVENTS = "acct.*.task.*.*";
/** One account's task log: the openings and later events of its tasks only. */
export const accountTaskSubjects = (account: string): string[] => [accountOpenings(account), `acct.${account}.task.*.*`];
/** The task log: openings and later events of every task (without the ledger's own messages). */
export const TASK_LOG_SUBJECTS = [TASK_OPENINGS, TASK_LATER_EVENTS] as const;
/** The part of the task log the reactors read: openings and `state` events. */
export const TASK_REACTOR_SUBJECTS = [TASK_OPENINGS, TASK_STATE_EVENTS] as const;

/**
 * The version of the task's event before `event` among those the reactors read: the acceptance between them
 * is skipped, which the event right after it says by carrying its copy.
 */
export const versionBeforeForReactors = (event: TaskEvent): number =>
  event.meta.version - ("accepted" in event.data && event.data.accepted !== undefined ? 2 : 1);

/** The account a task subject (either kind) belongs to: the token after `acct.`. */
export function accountOfSubject(subject: string): string {
  const end = subject.indexOf(".", 5);
  return subject.slice(5, end === -1 ? undefined : end);
}

/** design.md: width·height·(24·duration+1)/1024, rounded down, when the upstream reports no usage. */
export const estimateVideoTokens = (width: number, height: number, durationSeconds: number): number =>
  Math.floor((width * height * (24 * durationSeconds + 1)) / 1024);

/** The channels a job may run on, in the model's order. */
export const jobChannels = (job: Pick<VideoJobSpec, "provider" | "channels">): string[] => job.channels ?? [job.provider];
