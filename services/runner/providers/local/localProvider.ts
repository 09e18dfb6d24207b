import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { ObjectStore } from "@nats-io/obj";
import type { ProviderSettings } from "../../../../contracts/config.ts";
import { estimateVideoTokens } from "../../../../contracts/videoTask.ts";
import type { ProviderReport } from "../../../../machines/videoTask.ts";
import type { Logger } from "../../../shared/log.ts";
import type { ProviderTask, VideoProvider } from "../types.ts";
import { assertPublicAddress } from "./publicAddressGuard.ts";
import { fetchReference, type UrlCheck } from "./referenceFetch.ts";
import { renderVideo } from "./render.ts";
import { RenderFailure } from "./renderFailure.ts";
import { Semaphore } from "./semaphore.ts";

type LocalSettings = Extract<ProviderSettings, { kind: "local" }>;
const MAX_REFERENCE_BYTES = 20 * 1024 * 1024;

/**
 * The built-in generator: renders a real MP4 with ffmpeg inside the runner process and stores it in the
 * `videos` object store under `<providerTaskId>.mp4`. The provider task id carries a random part, so the
 * video's address is unguessable, and it is on the task's log, so a restarted runner finds a finished file.
 */
export class LocalProvider implements VideoProvider {
  readonly pollIntervalMs: number;
  private readonly jobs = new Map<string, Promise<ProviderReport>>();
  private readonly states = new Map<string, ProviderReport>();
  private readonly renders: Semaphore;
  private readonly aborter = new AbortController();
  /** Jobs sleeping out the queue delay; close() wakes them (one set, not a listener per job). */
  private readonly queued = new Set<() => void>();
  private readonly referenceCheck: UrlCheck | undefined;

  constructor(
    private readonly settings: LocalSettings,
    private readonly deps: { ffmpegPath: string; videos: ObjectStore; log: Logger },
  ) {
    this.pollIntervalMs = settings.pollIntervalMs;
    this.renders = new Semaphore(settings.maxConcurrentRenders || availableParallelism());
    this.referenceCheck = settings.allowPrivateReferenceUrls ? undefined : assertPublicAddress;
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const providerTaskId = `local-${task.taskId}-${randomBytes(9).toString("base64url")}`;
    this.start({ ...task, providerTaskId });
    return { providerTaskId };
  }

  async poll(task: ProviderTask & { providerTaskId: string }): Promise<ProviderReport> {
    const known = this.states.get(task.providerTaskId);
    if (known) return known;
    // Not ours (this process restarted): the file may already be stored; otherwise the render died with
    // the old process and starts again.
    const stored = await this.deps.videos.info(objectName(task.providerTaskId));
    if (stored && !stored.deleted) return succeeded(task, stored.name, stored.size);
    this.start(task);
    return this.states.get(task.providerTaskId) ?? { state: "queued" };
  }

  async close(): Promise<void> {
    this.aborter.abort();
    for (const wake of this.queued) wake();
    this.queued.clear();
    await Promise.allSettled(this.jobs.values());
  }

  private queueDelay(): Promise<void> {
    const ms = this.settings.queueDelayMs;
    if (ms === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const wake = () => {
        clearTimeout(timer);
        this.queued.delete(wake);
        if (this.aborter.signal.aborted) reject(new Error("runner shutting down"));
        else resolve();
      };
      const timer = setTimeout(wake, ms);
      this.queued.add(wake);
    });
  }

  private start(task: ProviderTask & { providerTaskId: string }): void {
    if (this.jobs.has(task.providerTaskId)) return;
    this.states.set(task.providerTaskId, { state: "queued" });
    const job = this.run(task)
      .catch((error: unknown): ProviderReport => {
        // Customers read the reason; ffmpeg's output and network errors stay with operators.
        const failure = error instanceof RenderFailure ? error : new RenderFailure("rendering failed", (error as Error).message);
        this.deps.log.warn({ taskId: task.taskId, reason: failure.reason, detail: failure.detail }, "local render failed");
        return { state: "failed", reason: failure.reason, ...(failure.detail ? { detail: failure.detail } : {}) };
      })
      .then((report) => {
        this.states.set(task.providerTaskId, report);
        this.jobs.delete(task.providerTaskId);
        return report;
      });
    this.jobs.set(task.providerTaskId, job);
  }

  private async run(task: ProviderTask & { providerTaskId: string }): Promise<ProviderReport> {
    const signal = this.aborter.signal;
    await this.queueDelay();
    return this.renders.run(async () => {
      this.states.set(task.providerTaskId, { state: "running" });
      const dir = await mkdtemp(join(tmpdir(), "reelay-render-"));
      try {
        const { job } = task;
        const imagePath = job.references.image_url
          ? await fetchReference(job.references.image_url, dir, MAX_REFERENCE_BYTES, signal, this.referenceCheck)
          : undefined;
        const outputPath = join(dir, "video.mp4");
        await renderVideo({
          ffmpegPath: this.deps.ffmpegPath,
          outputPath,
          width: job.width,
          height: job.height,
          durationSeconds: job.durationSeconds,
          prompt: job.prompt,
          generateAudio: job.generateAudio,
          watermark: job.watermark,
          ...(imagePath ? { imagePath } : {}),
          signal,
        });
        const name = objectName(task.providerTaskId);
        const { size } = await stat(outputPath);
        await this.deps.videos.put(
          { name, description: `task ${task.taskId}` },
          Readable.toWeb(createReadStream(outputPath)) as ReadableStream<Uint8Array>,
        );
        return succeeded(task, name, size);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
}

const objectName = (providerTaskId: string) => `${providerTaskId}.mp4`;

function succeeded(task: ProviderTask, object: string, bytes: number): ProviderReport {
  const { width, height, durationSeconds } = task.job;
  return {
    state: "succeeded",
    video: { object, bytes, contentType: "video/mp4" },
    durationSeconds,
    resolution: `${width}*${height}`,
    totalTokens: estimateVideoTokens(width, height, durationSeconds),
  };
}

