import { z } from "zod";
import { ChatModels } from "./chat.ts";

/** Ratios we accept (design.md) and their 720p frame sizes, `<width>*<height>` on the wire. */
export const RATIO_FRAME_SIZES = {
  "16:9": { width: 1280, height: 720 },
  "9:16": { width: 720, height: 1280 },
  "1:1": { width: 960, height: 960 },
  "4:3": { width: 1112, height: 834 },
  "3:4": { width: 834, height: 1112 },
  "21:9": { width: 1470, height: 630 },
} as const;
export type Ratio = keyof typeof RATIO_FRAME_SIZES;
export const RATIOS = Object.keys(RATIO_FRAME_SIZES) as [Ratio, ...Ratio[]];

export const VideoCapability = z.enum(["image", "video", "audio"]);
export type VideoCapability = z.infer<typeof VideoCapability>;

/**
 * What the runner applies to every provider, as data (services/runner/policy): when and how often it asks
 * for news, how many tasks may be at the upstream at once, how fast it may submit, how long one call may take.
 * Each kind sets defaults from its typical generation times.
 */
const providerPolicy = (defaults: { pollFirstAfterMs: number; pollEveryMs: number; pollMaxEveryMs: number; maxInFlight: number; timeoutMs: number }) => ({
  /** First status call this long after the upstream accepted. */
  pollFirstAfterMs: z.number().int().min(0).max(600_000).default(defaults.pollFirstAfterMs),
  /** Then every this long, growing by half each time up to `pollMaxEveryMs` while the task runs. */
  pollEveryMs: z.number().int().min(10).max(600_000).default(defaults.pollEveryMs),
  pollMaxEveryMs: z.number().int().min(10).max(600_000).default(defaults.pollMaxEveryMs),
  /** Tasks at this upstream at once, per runner; more wait in our queue, still pending. */
  maxInFlight: z.number().int().min(1).max(10_000).default(defaults.maxInFlight),
  /** Submits per second per runner (0: no limit). */
  submitsPerSecond: z.number().min(0).max(10_000).default(0),
  /** Longest one upstream call (submit, status, cancel) may take. */
  timeoutMs: z.number().int().min(100).max(600_000).default(defaults.timeoutMs),
});

/** x264's speed presets the local renderer offers, fastest first. */
export const X264Preset = z.enum(["ultrafast", "superfast", "veryfast", "faster", "fast", "medium"]);
export type X264Preset = z.infer<typeof X264Preset>;

const LocalProviderSettings = z.strictObject({
  kind: z.literal("local"),
  /** Time a local job stays queued before rendering, so pending → running → success is observable. */
  queueDelayMs: z.number().int().min(0).max(600_000).default(2000),
  /** Renders at once per runner process; 0 = one per CPU core. */
  maxConcurrentRenders: z.number().int().min(0).max(64).default(0),
  /**
   * x264's preset: a faster one spends less CPU per render and makes a larger file (a 4 s 720p clip: ultrafast
   * about half of veryfast's CPU and 2.6x its bytes).
   */
  encoderPreset: X264Preset.default("veryfast"),
  ...providerPolicy({ pollFirstAfterMs: 0, pollEveryMs: 250, pollMaxEveryMs: 1000, maxInFlight: 2000, timeoutMs: 30_000 }),
  /** Fetch reference URLs that point at private or local addresses (off: it would let customers probe our network). */
  allowPrivateReferenceUrls: z.boolean().default(false),
});

/**
 * An OpenAI-compatible video upstream (`POST /videos`, `GET /videos/{id}`, `GET /videos/{id}/content`):
 * OpenAI's own video models, a LiteLLM proxy, SGLang Diffusion serving open models, another reelay.
 */
const OpenAiProviderSettings = z.strictObject({
  kind: z.literal("openai"),
  /** Where the upstream's `/videos` lives, as OpenAI's SDKs take it: `https://api.openai.com/v1`. */
  baseUrl: z.url({ protocol: /^https?$/, error: "must be an http(s) URL such as https://api.openai.com/v1" }),
  /** The environment variable holding the upstream key (never the key itself: it must not be in a file). */
  apiKeyEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, "must be an environment variable name such as OPENAI_API_KEY"),
  /** The upstream's model id (`sora-2`, or what an SGLang or LiteLLM server serves). */
  model: z.string().min(1),
  /** Delete the upstream's copy once ours is stored (the upstream bills storage and expires it anyway). */
  deleteAfterCopy: z.boolean().default(true),
  ...providerPolicy({ pollFirstAfterMs: 20_000, pollEveryMs: 10_000, pollMaxEveryMs: 30_000, maxInFlight: 10, timeoutMs: 60_000 }),
  /** Fetch reference images from private or local addresses before uploading them (tests only). */
  allowPrivateReferenceUrls: z.boolean().default(false),
});

/** What every vendor entry has: where, which key variable, its share of a model's tasks, callbacks, cool-down. */
const vendorChannel = (examples: { baseUrl: string; keyVariable: string }) => ({
  /** The vendor's API base, as its official SDK takes it. */
  baseUrl: z.url({ protocol: /^https?$/, error: `must be an http(s) URL such as ${examples.baseUrl}` }),
  /** The environment variable holding the vendor's key (never the key itself: it must not be in a file). */
  apiKeyEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, `must be an environment variable name such as ${examples.keyVariable}`),
  /** Share of new tasks this channel gets among a model's channels with free capacity. */
  weight: z.number().positive().max(1000).default(1),
  /** How long a channel whose key or account the upstream refused stays out of rotation. */
  coolDownMs: z.number().int().min(100).max(24 * 60 * 60_000).default(5 * 60_000),
});

/** For vendors that call back when a task changes (Ark, Kling, MiniMax). */
const callbacks = {
  /** This reelay's public base URL, where the vendor can call back (`/hooks/upstream/<provider name>`); unset: polling only. */
  publicCallbackUrl: z.url({ protocol: /^https?$/, error: "must be the public http(s) base URL of this reelay" }).optional(),
};

/**
 * Seedance on Volcengine Ark (mainland China) or BytePlus ModelArk (international): one task API
 * (`POST {baseUrl}/contents/generations/tasks`, `GET …/tasks/{id}`, `DELETE …/tasks/{id}`). Polling defaults
 * follow Seedance's typical generation times (720p, 5 s: about a minute, queues add more).
 */
const ArkProviderSettings = z.strictObject({
  kind: z.literal("ark"),
  ...vendorChannel({ baseUrl: "https://ark.cn-beijing.volces.com/api/v3", keyVariable: "ARK_API_KEY" }),
  ...callbacks,
  ...providerPolicy({ pollFirstAfterMs: 30_000, pollEveryMs: 10_000, pollMaxEveryMs: 30_000, maxInFlight: 10, timeoutMs: 30_000 }),
});

/**
 * Wan on Alibaba Cloud DashScope / Model Studio (`https://dashscope.aliyuncs.com/api/v1`, Singapore
 * `https://dashscope-intl.aliyuncs.com/api/v1`). Defaults follow the documented per-model limits (2 tasks at
 * once, 2 submits a second) and Wan's one-to-five-minute generations.
 */
const DashScopeProviderSettings = z.strictObject({
  kind: z.literal("dashscope"),
  ...vendorChannel({ baseUrl: "https://dashscope.aliyuncs.com/api/v1", keyVariable: "DASHSCOPE_API_KEY" }),
  ...providerPolicy({ pollFirstAfterMs: 30_000, pollEveryMs: 10_000, pollMaxEveryMs: 30_000, maxInFlight: 2, timeoutMs: 30_000 }),
});

/**
 * Kling (`https://api-beijing.klingai.com`, or `https://api-singapore.klingai.com` outside China): every call
 * carries a short-lived JWT signed from the access key and the secret key, both read from the environment.
 */
const KlingProviderSettings = z.strictObject({
  kind: z.literal("kling"),
  ...vendorChannel({ baseUrl: "https://api-beijing.klingai.com", keyVariable: "KLING_ACCESS_KEY" }),
  ...callbacks,
  /** The environment variable holding Kling's secret key (signs the JWT; never sent). */
  secretKeyEnv: z.string().regex(/^[A-Z_][A-Z0-9_]*$/, "must be an environment variable name such as KLING_SECRET_KEY"),
  ...providerPolicy({ pollFirstAfterMs: 30_000, pollEveryMs: 10_000, pollMaxEveryMs: 30_000, maxInFlight: 5, timeoutMs: 30_000 }),
});

/** MiniMax Hailuo (`https://api.minimaxi.com` in China, `https://api.minimax.io` outside). */
const MiniMaxProviderSettings = z.strictObject({
  kind: z.literal("minimax"),
  ...vendorChannel({ baseUrl: "https://api.minimaxi.com", keyVariable: "MINIMAX_API_KEY" }),
  ...callbacks,
  ...providerPolicy({ pollFirstAfterMs: 30_000, pollEveryMs: 10_000, pollMaxEveryMs: 30_000, maxInFlight: 5, timeoutMs: 30_000 }),
});

/** Google Veo on the Gemini API (`https://generativelanguage.googleapis.com`, an API key in `x-goog-api-key`). */
const VeoProviderSettings = z.strictObject({
  kind: z.literal("veo"),
  ...vendorChannel({ baseUrl: "https://generativelanguage.googleapis.com", keyVariable: "GEMINI_API_KEY" }),
  ...providerPolicy({ pollFirstAfterMs: 20_000, pollEveryMs: 10_000, pollMaxEveryMs: 30_000, maxInFlight: 10, timeoutMs: 60_000 }),
  /** Veo takes images inline: fetch reference images from private or local addresses (tests only). */
  allowPrivateReferenceUrls: z.boolean().default(false),
});

/** The upstream vendors behind one task API each (not the local renderer, not the OpenAI-compatible relay). */
export const VENDOR_KINDS = ["ark", "dashscope", "kling", "minimax", "veo"] as const;
export type VendorKind = (typeof VENDOR_KINDS)[number];

export const ProviderSettings = z.discriminatedUnion("kind", [
  LocalProviderSettings,
  OpenAiProviderSettings,
  ArkProviderSettings,
  DashScopeProviderSettings,
  KlingProviderSettings,
  MiniMaxProviderSettings,
  VeoProviderSettings,
]);
export type ProviderSettings = z.infer<typeof ProviderSettings>;

export const ImageRole = z.enum(["first_frame", "reference_image"]);
export type ImageRole = z.infer<typeof ImageRole>;

export const VideoModelConfig = z
  .strictObject({
    /** One provider entry, or several: the model's channels, tried by free capacity and weight. */
    provider: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    /** The vendor's model id, or provider name → model id when the channels are of different vendors. */
    upstreamModel: z.union([z.string().min(1), z.record(z.string().min(1), z.string().min(1))]).optional(),
    /**
     * What the upstream charges us, in yuan per its billing unit (per 1,000,000 tokens on Ark, per second of
     * video on DashScope, Kling, MiniMax and Veo), or provider name → price. Recorded on each finished task
     * so `reelay audit upstream` shows cost beside charge.
     */
    upstreamPrice: z.union([z.number().nonnegative(), z.record(z.string().min(1), z.number().nonnegative())]).optional(),
    /** How the request's image_url is sent to a vendor that distinguishes: the first frame, or a reference. */
    imageRole: ImageRole.default("first_frame"),
    enabled: z.boolean().default(true),
    capabilities: z.array(VideoCapability).default([]),
    /** Yuan per 1,000,000 tokens. */
    pricePerMillionTokens: z.number().positive(),
    minDurationSeconds: z.number().int().min(1).default(4),
    maxDurationSeconds: z.number().int().min(1).default(15),
    defaultDurationSeconds: z.number().int().min(1).default(5),
  })
  .refine((m) => m.minDurationSeconds <= m.defaultDurationSeconds && m.defaultDurationSeconds <= m.maxDurationSeconds, {
    message: "durations must satisfy minDurationSeconds <= defaultDurationSeconds <= maxDurationSeconds",
  });
export type VideoModelConfig = z.infer<typeof VideoModelConfig>;

export const ReelayConfig = z
  .strictObject({
    providers: z.record(z.string().min(1), ProviderSettings),
    videoModels: z.record(z.string().min(1), VideoModelConfig),
    /** Chat model name → echo or an OpenAI-compatible upstream (contracts/chat.ts). Optional: older configs have none. */
    chatModels: ChatModels.default({}),
    limits: z
      .strictObject({
        maxPromptChars: z.number().int().min(1).default(4000),
        maxBodyBytes: z.number().int().min(1024).default(1_048_576),
        /** A task not final after this long fails with a timeout reason. */
        maxTaskMs: z.number().int().min(1000).default(15 * 60_000),
        /**
         * A chat request's hold stops holding money this long after it was made, when its edge never closed it
         * (crashed mid-answer). Longer than any answer should take: an answer still running past it is charged
         * all the same, as far as the account's credit limit allows.
         */
        chatHoldTtlMs: z.number().int().min(1000).default(30 * 60_000),
        /** Requests per second per API key across every edge (0: no limit); bursts up to `burstPerKey`. */
        requestsPerSecondPerKey: z.number().min(0).default(0),
        burstPerKey: z.number().int().min(1).default(100),
        /** How long create waits for the upstream to accept before answering without provider_task_id. */
        submitWaitMs: z.number().int().min(100).default(10_000),
        /**
         * How long a create keeps trying to write its task's opening when NATS does not answer (each try with
         * the same msgID, so it lands once) before answering 503. At most a minute: a try is known to land once
         * only while the stream remembers the first try's msgID (its 2-minute duplicate window, less a last
         * try's time and a margin); a later one could open the task a second time once the first had ended.
         */
        createWriteMs: z.number().int().min(100).max(60_000).default(10_000),
        /** An idle event stream gets a comment line this often, so clients and proxies keep it open. */
        sseKeepaliveMs: z.number().int().min(100).max(120_000).default(15_000),
        /**
         * Client connections the edge holds at once; past it a new connection is closed as soon as it is accepted.
         * 0: three quarters of the process's open-file limit, so a flood of idle connections cannot take the
         * files the rest of the process needs (the runner's upstream calls and renders, NATS, stored videos).
         */
        maxConnections: z.number().int().min(0).default(0),
        /** Event streams (SSE) one account may have open on one edge; more answer 429. */
        eventStreamsPerAccount: z.number().int().min(1).max(100_000).default(50),
        /**
         * Chat completions one account may have in flight on one edge (streaming or not); more answer 429, which
         * OpenAI's client libraries retry after a pause. Every tenant shares the upstream keys: one tenant's flood
         * of long answers cannot take all of a key's concurrency upstream, nor the edge's memory.
         */
        chatRequestsPerAccount: z.number().int().min(1).max(100_000).default(256),
        /**
         * Bytes of request bodies one edge holds at once, all callers together (each body from before its first
         * byte is read until its answer ends: its declared length, or the route's largest without one). Past it,
         * a request gets 503 before its body is read: bodies a client sends slowly cannot fill the edge's memory.
         */
        bodyBytesInFlight: z.number().int().min(1024 * 1024).default(256 * 1024 ** 2),
        /** The part of it one account may hold (requests without a key, such as vendor callbacks, share one); more: 429. */
        bodyBytesInFlightPerAccount: z.number().int().min(1024 * 1024).default(64 * 1024 ** 2),
      })
      .prefault({}),
    runner: z
      .strictObject({
        /** A runner that stops sending heartbeats for this long loses its tasks to another runner. */
        leaseMs: z.number().int().min(500).default(30_000),
        /** Tasks one runner hosts at once, across providers (each provider also has its own `maxInFlight`). */
        maxConcurrentTasks: z.number().int().min(1).default(2000),
        /**
         * Tasks one runner holds waiting for a channel slot, shared among the accounts waiting there. Once full,
         * an account below its share takes the place of a task of the account furthest over it, and other new
         * tasks go back to the task log's queue at once, where any runner can take them (services/runner/intake.ts).
         */
        maxWaitingTasks: z.number().int().min(1).default(200),
        /** Largest finished video copied into the object store; a larger one fails its task. */
        maxResultBytes: z.number().int().min(1024).default(512 * 1024 * 1024),
        /** Copy results from private or local addresses (tests' fake vendors on loopback); off in production. */
        allowPrivateResultUrls: z.boolean().default(false),
      })
      .prefault({}),
    /** Videos copied into reelay's object store: a task's `video_url` works as long as its object is kept. */
    videos: z
      .strictObject({
        /** Days a video is kept after it was copied, then removed by NATS (the object store's max age). */
        retentionDays: z.number().int().min(1).max(3650).default(30),
        /**
         * The videos object store's size (its stream's max_bytes, discard new): a copy that does not fit fails
         * its task, free, instead of pushing out other data. Reserved out of JetStream's store (max_file_store).
         */
        maxStoreBytes: z.number().int().min(1024 * 1024).default(12 * 1024 ** 3),
        /** The uploaded references' store (OpenAI's `input_reference`), a bucket of its own with its own size. */
        referenceStoreBytes: z.number().int().min(1024 * 1024).default(1024 ** 3),
        /** Bytes of uploaded references one account may have stored at once (they go when their tasks end). */
        referenceBytesPerAccount: z.number().int().min(1024).default(100 * 1024 ** 2),
        /**
         * Bytes of stored files an edge keeps on its disk (in TMPDIR) for the Range requests that follow, for
         * videos and for references each; files being sent stay until their last answer ends, beyond it.
         */
        edgeCacheBytes: z.number().int().min(0).default(1024 ** 3),
      })
      .prefault({}),
    /** Browser apps allowed to call reelay (CORS): their origins, or "*" for any. None by default. */
    cors: z
      .strictObject({
        allowedOrigins: z.array(z.string().regex(/^(\*|https?:\/\/[^/\s]+)$/, 'each origin is "*" or scheme://host[:port] without a path')).default([]),
      })
      .prefault({}),
    /** Task status changes POSTed to a create's callback_url (services/webhooks). */
    webhooks: z
      .strictObject({
        /** Accept http:// callback URLs (https only by default: the body names the customer's videos). */
        allowHttp: z.boolean().default(false),
        /** Deliver to private or local addresses (tests' receivers on loopback); off: customers could probe our network. */
        allowPrivateAddresses: z.boolean().default(false),
        /** One delivery attempt may take this long. */
        timeoutMs: z.number().int().min(100).max(60_000).default(10_000),
        /** A delivery is retried (exponential back-off) for this long after its event, then given up. */
        retryForMs: z.number().int().min(1000).max(6 * 24 * 60 * 60_000).default(24 * 60 * 60_000),
        /** First pause after a failed attempt; it doubles each time up to `maxBackoffMs`. */
        firstBackoffMs: z.number().int().min(10).default(1000),
        /** Longest pause between two attempts. */
        maxBackoffMs: z.number().int().min(100).default(60 * 60_000),
        /** Deliveries a dispatcher makes at once, all accounts together. */
        maxInFlight: z.number().int().min(1).max(100_000).default(1000),
        /** Deliveries a dispatcher makes at once for one account: no account takes the whole capacity. */
        maxInFlightPerAccount: z.number().int().min(1).max(100_000).default(10),
        /** An endpoint (callback URL origin) that failed this many times in a row is paused … */
        pauseAfterFailures: z.number().int().min(1).default(10),
        /** … for this long: its jobs wait on the server without an attempt, then one attempt tries it again. */
        pauseMs: z.number().int().min(100).default(5 * 60_000),
      })
      .prefault({}),
  })
  .superRefine((config, ctx) => {
    for (const [name, model] of Object.entries(config.videoModels)) {
      for (const provider of channelsOf(model)) {
        if (!(provider in config.providers)) {
          ctx.addIssue({
            code: "custom",
            path: ["videoModels", name, "provider"],
            message: `unknown provider "${provider}" (configured: ${Object.keys(config.providers).join(", ") || "none"})`,
          });
        } else if (isVendorEntry(config.providers[provider]) && upstreamModelOf(model, provider) === undefined) {
          ctx.addIssue({ code: "custom", path: ["videoModels", name, "upstreamModel"], message: `needs the vendor's model id for provider "${provider}"` });
        }
      }
    }
    // GET /models lists both kinds in one namespace, so a name must mean one model.
    for (const name of Object.keys(config.chatModels)) {
      if (name in config.videoModels) {
        ctx.addIssue({ code: "custom", path: ["chatModels", name], message: `"${name}" is already a video model name` });
      }
    }
  });
export type ReelayConfig = z.infer<typeof ReelayConfig>;

/** A model's channels: the provider entries that may run its tasks. */
export const channelsOf = (model: Pick<VideoModelConfig, "provider">): string[] => (typeof model.provider === "string" ? [model.provider] : [...new Set(model.provider)]);

/** The vendor's model id for a model on one channel, if the config names one. */
export function upstreamModelOf(model: Pick<VideoModelConfig, "upstreamModel">, provider: string): string | undefined {
  const mapping = model.upstreamModel;
  if (mapping === undefined || typeof mapping === "string") return mapping;
  return Object.hasOwn(mapping, provider) ? mapping[provider] : undefined;
}

/** The upstream's price for a model on one channel, if the config names one. */
export function upstreamPriceOf(model: Pick<VideoModelConfig, "upstreamPrice">, provider: string): number | undefined {
  const price = model.upstreamPrice;
  if (price === undefined || typeof price === "number") return price;
  return Object.hasOwn(price, provider) ? price[provider] : undefined;
}

export type VendorSettings = Extract<ProviderSettings, { kind: VendorKind }>;
export const isVendorEntry = (settings: ProviderSettings | undefined): settings is VendorSettings => (VENDOR_KINDS as readonly string[]).includes(settings?.kind ?? "");

/** The environment variables a provider entry reads its credentials from (the local renderer needs none). */
export function keyVariablesOf(settings: ProviderSettings): string[] {
  if (settings.kind === "local") return [];
  if (settings.kind === "kling") return [settings.apiKeyEnv, settings.secretKeyEnv];
  return [settings.apiKeyEnv];
}
