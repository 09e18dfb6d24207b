import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProviderPolicy } from "../../services/runner/policy/providerPolicy.ts";
import {
  ProviderRejected,
  ProviderUnavailable,
  type AcceptedTask,
  type ProviderStatus,
  type ProviderTask,
  type VideoProvider,
} from "../../services/runner/providers/types.ts";

/** What the fake upstream does with the next submit. */
export type SubmitBehaviour = "accept" | "reject" | "429" | "5xx" | "acceptThenLoseAnswer" | "hang" | "hangThenLandLate";

/** How an accepted task's generation goes, status call by status call. */
export type Generation = { kind: "succeed"; after: number; usageTokens?: number } | { kind: "fail"; after: number; reason: string } | { kind: "never" };

/** The smallest file that passes as an MP4 (an `ftyp` box): what an instant generator "renders". */
const TINY_MP4 = Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from("ftypisom"), Buffer.alloc(12)]);

/**
 * An async video vendor in memory, and its adapter: tasks are created, go queued → running → a result,
 * and every behaviour the provider contract names can be scripted (rejections, 429 storms, 5xx, lost
 * answers, hangs, failed generations, a result copy that breaks once). With no script it is the
 * instant provider that tests not about rendering run on. Test-only: never wired into the product.
 */
export class ScriptedVendor implements VideoProvider {
  readonly policy: ProviderPolicy;
  readonly submits: string[] = [];
  /** Upstream ids cancelled, in order. */
  readonly cancelled: string[] = [];
  readonly statusCalls = new Map<string, number>();
  private readonly tasks = new Map<string, { reference: string; generation: Generation }>();
  private readonly submitScript: SubmitBehaviour[] = [];
  private statusFailures = 0;
  private brokenResults = 0;
  private readonly dir = mkdtempSync(join(tmpdir(), "reelay-scripted-"));
  generation: Generation = { kind: "succeed", after: 1 };
  inFlightPeak = 0;

  /** `video`: what every task "renders" (a real MP4 where a test probes or cuts it). */
  constructor(policy: Partial<ProviderPolicy> = {}, video: Buffer = TINY_MP4) {
    this.policy = { pollFirstAfterMs: 0, pollEveryMs: 10, pollMaxEveryMs: 20, maxInFlight: 100, submitsPerSecond: 0, timeoutMs: 2_000, ...policy };
    writeFileSync(join(this.dir, "video.mp4"), video);
  }

  /** The next submits behave like this, in order; then they accept. */
  scriptSubmits(...behaviours: SubmitBehaviour[]): void {
    this.submitScript.push(...behaviours);
  }

  /** The next `count` status calls answer 5xx. */
  failStatusCalls(count: number): void {
    this.statusFailures += count;
  }

  /** The next `count` results break while being copied (the download is cut). */
  breakResults(count: number): void {
    this.brokenResults += count;
  }

  get inFlight(): number {
    return [...this.tasks.values()].filter((task) => task.generation.kind !== "never").length;
  }

  async submit(task: ProviderTask): Promise<{ providerTaskId: string }> {
    const behaviour = this.submitScript.shift() ?? "accept";
    switch (behaviour) {
      case "reject":
        throw new ProviderRejected("the prompt was refused by the upstream's content policy");
      case "429":
        throw new ProviderUnavailable("429 rate limited", 50);
      case "5xx":
        throw new ProviderUnavailable("503 service unavailable");
      case "hang":
        this.create(task);
        await new Promise((_, reject) => task.signal.addEventListener("abort", () => reject(task.signal.reason), { once: true }));
        throw new Error("unreachable");
      case "hangThenLandLate":
        // The request never answers, and the upstream registers the task only after our side gave up.
        await new Promise((_, reject) =>
          task.signal.addEventListener("abort", () => {
            setTimeout(() => this.create(task), 500);
            reject(task.signal.reason);
          }, { once: true }),
        );
        throw new Error("unreachable");
      case "acceptThenLoseAnswer":
        this.create(task);
        throw new ProviderUnavailable("connection reset after the request was sent");
      case "accept":
        return { providerTaskId: this.create(task) };
    }
  }

  async findByClientReference(task: ProviderTask): Promise<string | undefined> {
    for (const [id, known] of this.tasks) if (known.reference === task.clientReference) return id;
    return undefined;
  }

  async status(task: AcceptedTask): Promise<ProviderStatus> {
    if (this.statusFailures > 0) {
      this.statusFailures--;
      throw new ProviderUnavailable("502 bad gateway");
    }
    const calls = (this.statusCalls.get(task.providerTaskId) ?? 0) + 1;
    this.statusCalls.set(task.providerTaskId, calls);
    // A vendor's tasks outlive our runners: one this process never saw (another runner submitted it, or
    // this process restarted) is known upstream all the same.
    let known = this.tasks.get(task.providerTaskId);
    if (!known) {
      known = { reference: task.clientReference, generation: this.generation };
      this.tasks.set(task.providerTaskId, known);
    }
    const generation = known.generation;
    if (generation.kind === "never" || calls < generation.after) return calls === 1 ? { state: "queued" } : { state: "running" };
    if (generation.kind === "fail") return { state: "failed", reason: generation.reason, detail: `vendor said: ${generation.reason}` };
    const path = this.brokenResults-- > 0 ? join(this.dir, "missing.mp4") : join(this.dir, "video.mp4");
    return { state: "succeeded", result: { kind: "file", path }, ...(generation.usageTokens === undefined ? {} : { usageTokens: generation.usageTokens }) };
  }

  async cancel(task: AcceptedTask): Promise<void> {
    this.cancelled.push(task.providerTaskId);
    this.tasks.delete(task.providerTaskId);
  }

  async forget(task: AcceptedTask): Promise<void> {
    this.tasks.delete(task.providerTaskId);
  }

  async close(): Promise<void> {
    rmSync(this.dir, { recursive: true, force: true });
  }

  private create(task: ProviderTask): string {
    const id = `scripted-${task.taskId}-${randomUUID().slice(0, 8)}`;
    this.submits.push(id);
    this.tasks.set(id, { reference: task.clientReference, generation: this.generation });
    this.inFlightPeak = Math.max(this.inFlightPeak, this.inFlight);
    return id;
  }
}
