import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderSettings } from "../../../../contracts/config.ts";
import type { Logger } from "../../../shared/log.ts";
import { policyOf, type ProviderPolicy } from "../../policy/providerPolicy.ts";
import { UpstreamLost, type AcceptedTask, type ProviderStatus, type ProviderTask, type VideoProvider } from "../types.ts";
import type { Dispatcher } from "undici";
import { publicOnly } from "../../../shared/publicAddressGuard.ts";
import { fetchReference } from "./referenceFetch.ts";
import { renderVideo } from "./render.ts";
import { RenderFailure } from "./renderFailure.ts";
import { shortOfResources } from "./shortOfResources.ts";
import { Semaphore } from "../../../shared/semaphore.ts";

type LocalSettings = Extract<ProviderSettings, { kind: "local" }>;
const MAX_REFERENCE_BYTES = 20 * 1024 * 1024;
/** The first wait before a render short of system resources starts again; each next one doubles, up to the most. */
const RESOURCE_RETRY_FIRST_MS = 500;
const RESOURCE_RETRY_MAX_MS = 30_000;
/** A render no runner asked about for this long (and ten of its longest polling intervals) is dropped. */
const ORPHAN_AFTER_MS = 10 * 60_000;

interface LocalJob {
  status: ProviderStatus;
  /** The render's own folder (the result file lives there until `forget`). */
  dir?: string;
  /** Set while the job waits out the queue delay (thousands may wait: a timer each, no signal, no promise). */
  queued?: NodeJS.Timeout;
  /** Aborts the render, once it started. */
  abort?: AbortController;
  /** Starts again after the system was short of resources (see `tryAgainLater`). */
  resourceRetries: number;
  /** When (performance.now()) a runner last asked about it (see `dropOrphans`). */
  askedAt: number;
}

/** What a render needs of its task (not the submitting call's signal, which belongs to the runner). */
type RenderOrder = Pick<ProviderTask, "taskId" | "job">;

/**
 * The built-in generator behind the provider port: renders a real MP4 with ffmpeg in this process and
 * reports it as a file, which the runner copies into the object store like any vendor's result. A
 * render belongs to this process: `status` of a task it does not know answers `UpstreamLost` and starts
 * nothing (another runner may still be rendering it); the runner's machine rereads the task's log and calls
 * `restart` only when the task is still live and its own.
 */
export class LocalProvider implements VideoProvider {
  readonly policy: ProviderPolicy;
  private readonly jobs = new Map<string, LocalJob>();
  private readonly running = new Set<Promise<void>>();
  private readonly renders: Semaphore;
  private readonly closing = new AbortController();
  private readonly referenceDispatcher: Dispatcher | undefined;
  private readonly orphanAfterMs: number;
  private readonly orphanSweep: NodeJS.Timeout;

  constructor(
    private readonly settings: LocalSettings,
    private readonly deps: { ffmpegPath: string; log: Logger; orphanAfterMs?: number },
  ) {
    this.policy = policyOf(settings);
    this.renders = new Semaphore(settings.maxConcurrentRenders || availableParallelism());
    this.referenceDispatcher = settings.allowPrivateReferenceUrls ? undefined : publicOnly();
    this.orphanAfterMs = deps.orphanAfterMs ?? Math.max(ORPHAN_AFTER_MS, 10 * settings.pollMaxEveryMs);
    this.orphanSweep = setInterval(() => this.dropOrphans(), Math.min(60_000, this.orphanAfterMs)).unref();
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    // A random part keeps the video's address (named after this id) unguessable. randomUUID draws from a cached
    // pool of entropy; randomBytes asked the kernel on every create (2.6% of the runner's CPU on the create path).
    const providerTaskId = `local-${task.taskId}-${randomUUID().replaceAll("-", "")}`;
    this.start({ ...task, providerTaskId });
    return { providerTaskId };
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    const job = this.jobs.get(task.providerTaskId);
    if (!job) throw new UpstreamLost(`no render of ${task.providerTaskId} in this process`);
    job.askedAt = performance.now();
    return job.status;
  }

  async restart(task: AcceptedTask): Promise<void> {
    this.start(task);
  }

  async cancel(task: AcceptedTask): Promise<void> {
    await this.forget(task);
  }

  async forget(task: AcceptedTask): Promise<void> {
    await this.drop(task.providerTaskId);
  }

  async close(): Promise<void> {
    clearInterval(this.orphanSweep);
    this.closing.abort();
    for (const job of this.jobs.values()) {
      clearTimeout(job.queued);
      job.abort?.abort(this.closing.signal.reason);
    }
    await Promise.allSettled(this.running);
    await Promise.all([...this.jobs.values()].map((job) => (job.dir ? rm(job.dir, { recursive: true, force: true }) : undefined)));
    this.jobs.clear();
  }

  private async drop(providerTaskId: string): Promise<void> {
    const job = this.jobs.get(providerTaskId);
    if (!job) return;
    this.jobs.delete(providerTaskId);
    clearTimeout(job.queued);
    job.abort?.abort();
    if (job.dir) await rm(job.dir, { recursive: true, force: true });
  }

  /**
   * Drops renders no runner asks about any more: a task another runner took over (this one's lease lapsed in a
   * NATS outage, and its machine stepped aside) is rendered again there, and nothing here ever forgot this
   * process's render: it ran on, and its video stayed on the disk until the process stopped.
   */
  private dropOrphans(): void {
    const now = performance.now();
    for (const [providerTaskId, job] of this.jobs) {
      if (now - job.askedAt < this.orphanAfterMs) continue;
      this.deps.log.info({ providerTaskId }, "dropped a local render no runner asks about any more (its task moved to another runner)");
      void this.drop(providerTaskId).catch(() => undefined);
    }
  }

  private start(task: AcceptedTask): void {
    if (this.jobs.has(task.providerTaskId) || this.closing.signal.aborted) return;
    const job: LocalJob = { status: { state: "queued" }, resourceRetries: 0, askedAt: performance.now() };
    this.jobs.set(task.providerTaskId, job);
    const order: RenderOrder = { taskId: task.taskId, job: task.job };
    if (this.settings.queueDelayMs > 0) job.queued = setTimeout(() => this.begin(order, job), this.settings.queueDelayMs);
    else this.begin(order, job);
  }

  private begin(order: RenderOrder, job: LocalJob): void {
    job.queued = undefined;
    // Its own signal, aborted by `forget` or `close` (which aborts every job's): AbortSignal.any over the
    // provider's long-lived signal stays linked to it on Node 20 for the process's life (about 55 bytes a render).
    const abort = new AbortController();
    job.abort = abort;
    const signal = abort.signal;
    const work = this.render(order, job, signal)
      .catch(async (error: unknown) => {
        if (signal.aborted) return;
        if (shortOfResources(error)) return this.tryAgainLater(order, job, signal, error);
        // Customers read the reason; ffmpeg's output and network errors stay with operators.
        const failure = error instanceof RenderFailure ? error : new RenderFailure("rendering failed", (error as Error).message);
        this.deps.log.warn({ taskId: order.taskId, reason: failure.reason, detail: failure.detail }, "local render failed");
        job.status = { state: "failed", reason: failure.reason, ...(failure.detail ? { detail: failure.detail } : {}) };
      })
      .finally(() => this.running.delete(work));
    this.running.add(work);
  }

  /**
   * A render the system had no room for (no file, process or memory to spare: a flood of connections to an edge
   * in this process, another program) waits and starts again, sooner at first. It failed the task for good,
   * free but lost to its customer, while a vendor that is short of room is asked again. The task's deadline
   * still bounds it: the runner cancels it then, which clears the timer.
   */
  private async tryAgainLater(order: RenderOrder, job: LocalJob, signal: AbortSignal, error: unknown): Promise<void> {
    const retryInMs = Math.min(RESOURCE_RETRY_MAX_MS, RESOURCE_RETRY_FIRST_MS * 2 ** job.resourceRetries);
    job.resourceRetries++;
    this.deps.log.warn({ taskId: order.taskId, err: error, retryInMs, attempt: job.resourceRetries }, "a local render was short of system resources; trying it again");
    const dir = job.dir;
    job.dir = undefined;
    if (dir) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    // Forgotten (cancelled, its deadline passed) or the provider closing while the folder went.
    if (signal.aborted) return;
    job.status = { state: "queued" };
    job.queued = setTimeout(() => this.begin(order, job), retryInMs);
  }

  private async render(order: RenderOrder, job: LocalJob, signal: AbortSignal): Promise<void> {
    await this.renders.run(async () => {
      signal.throwIfAborted();
      job.status = { state: "running" };
      const dir = await mkdtemp(join(tmpdir(), "reelay-render-"));
      job.dir = dir;
      const { job: spec } = order;
      const imagePath = spec.references.image_url
        ? await fetchReference(spec.references.image_url, dir, MAX_REFERENCE_BYTES, signal, this.referenceDispatcher)
        : undefined;
      const outputPath = join(dir, "video.mp4");
      await renderVideo({
        ffmpegPath: this.deps.ffmpegPath,
        outputPath,
        width: spec.width,
        height: spec.height,
        durationSeconds: spec.durationSeconds,
        prompt: spec.prompt,
        generateAudio: spec.generateAudio,
        watermark: spec.watermark,
        preset: this.settings.encoderPreset,
        ...(imagePath ? { imagePath } : {}),
        signal,
      });
      job.status = { state: "succeeded", result: { kind: "file", path: outputPath }, durationSeconds: spec.durationSeconds, resolution: `${spec.width}*${spec.height}` };
    });
  }
}
