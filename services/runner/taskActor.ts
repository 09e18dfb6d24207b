import { setTimeout as sleep } from "node:timers/promises";
import type { ObjectStore } from "@nats-io/obj";
import { clientReference, estimateVideoTokens, jobChannels, type TaskEvent, type TaskSubmittedEvent, type VideoJobSpec } from "../../contracts/videoTask.ts";
import { isFinal, type ProviderReport } from "../../machines/videoTask.ts";
import { decideTaskSteps, foldTask, initialTaskState, taskOf, type TaskCommand, type TaskDeciderState } from "../../machines/videoTaskDecider.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import type { Logger } from "../shared/log.ts";
import type { TaskLog } from "../shared/taskLog.ts";
import type { ChannelLease, ChannelPool } from "./policy/channelPool.ts";
import { pollDelay, retryDelay } from "./policy/schedule.ts";
import { ProviderMisconfigured, ProviderRejected, ProviderUnavailable, type AcceptedTask, type ProviderStatus, type VideoProvider } from "./providers/types.ts";
import type { ObjectBucket } from "./newObject.ts";
import { copyResult, ResultGone, ResultUnusable } from "./resultCopy.ts";
import { videoObjectName } from "./videoNames.ts";
import { withSignal } from "./scopedSignal.ts";

export interface TaskActorDeps {
  videos: ObjectStore;
  /** The same bucket, written directly for a task's first copy (resultCopy.ts). */
  videoBucket: ObjectBucket;
  /** The key stored videos are named with (videoNames.ts). */
  videoNameKey: Buffer;
  log: Logger;
  taskLog: TaskLog;
  /** The runner's channels: the task takes a slot on one of its model's channels before it is submitted. */
  channels: ChannelPool;
  maxTaskMs: number;
  maxResultBytes: number;
  allowPrivateResultAddresses: boolean;
  /** Aborted when the runner shuts down: no more appends or upstream calls from this point. */
  shutdown: AbortSignal;
}

/** How a hosted task ended for this runner. */
export type TaskActorExit = "final" | "steppedAside" | "stopped";

/**
 * What a step of the actor ended with: the task left this runner, or it waits for its next poll until
 * `pollAt` (epoch ms, never past its deadline). A waiting task keeps no call chain (no suspended async
 * functions, promises or signals): the runner holds one timer for it and calls `resume` when it is due.
 */
export type TaskActorStep = { exit: TaskActorExit } | { pollAt: number };

const FINAL: TaskActorStep = { exit: "final" };
const STOPPED: TaskActorStep = { exit: "stopped" };

const MISCONFIGURED = "this model is not available right now; no charge was made";
/** The reason the calls of an actor that ended are aborted with (one object: nothing is built per task). */
const ACTOR_ENDED = new Error("the task's actor ended");
/**
 * After a submit the deadline cut short, the upstream may still register the task a little later (the
 * request was sent): it is looked up again after these pauses, and cancelled when found.
 */
const LATE_LOOKUP_PAUSES_MS = [0, 1_000, 5_000, 30_000];
/** A wait at least this long drops the actor's call signal (see `dropIdleCallSignal`). */
const LONG_PAUSE_MS = 1_000;
/** For calls that must finish even when the actor ends (cancel, forget): bounded by their own timeout only. */
const NEVER_ABORTED = new AbortController().signal;

/**
 * The upstream's reported usage wins; otherwise design.md's estimate on what was delivered: the frame size and
 * duration the upstream reports (MiniMax's 768P is larger than the 720p frame reserved for), else what was asked.
 */
export function billedTokens(status: { usageTokens?: number; durationSeconds?: number; resolution?: string }, job: VideoJobSpec): number {
  if (status.usageTokens !== undefined) return status.usageTokens;
  const frame = /^(\d{2,5})\*(\d{2,5})$/.exec(status.resolution ?? "");
  const [width, height] = frame ? [Number(frame[1]), Number(frame[2])] : [job.width, job.height];
  return estimateVideoTokens(width, height, status.durationSeconds ?? job.durationSeconds);
}

/**
 * The actor of one live task: decide → append → evolve, with the upstream calls in between. It owns,
 * for every provider, the policy the adapters don't: a slot under the provider's limits before submit,
 * an intent event before submit (so a crash never makes a second upstream task), the deadline around
 * every call (past it the task fails and its money is freed, whatever the upstream does), retries with
 * back-off for passing trouble, the polling schedule, copying the result into the object store, the
 * usage fallback, and cancelling an upstream task that ran out of time. A lost append race means
 * another runner owns the task: this one stops its own work on it and steps aside.
 */
export class TaskActor {
  private state: TaskDeciderState = initialTaskState();
  private lastSequence = 0;
  /** Made on first use: most tasks never log. */
  private taskLogger: Logger | undefined;
  /** Stopped, finished or stepped aside: no more calls, pauses end at once. */
  private ended = false;
  /**
   * The signal of the actor's upstream calls, which run one at a time: made once and renewed only after a
   * call's timeout fired it or a long pause dropped it (Node 20 makes every AbortController transferable, a
   * few microseconds and about half a kilobyte each).
   */
  private calls: AbortController | undefined;
  /** A call is in progress on `calls` (ending the actor then aborts it; otherwise nothing needs aborting). */
  private calling = false;
  /**
   * This is the first delivery of the task's first event: no runner had the task before, so nothing can have
   * been submitted for it before this actor's first attempt.
   */
  private firstHolder = false;
  /** Ends the current pause of a retry early (on abort, or when the upstream said there is news). */
  private wake: (() => void) | undefined;
  /** The slot this task holds, and with it the channel it runs on. */
  private lease: ChannelLease | undefined;
  /** A copy of the result was started before: its name may be taken (by a whole or partial object). */
  private copyStarted = false;
  /** A result address already turned out expired once: the upstream was asked again for a fresh one. */
  private askedForFreshResult = false;
  /** When the upstream was last asked about the task (epoch ms). */
  private lastAskedAt = 0;
  /** A submit was sent and has not been answered (still in flight, or cut short by the deadline). */
  private submitUnanswered = false;
  /** Channels where a submit of this actor's ended without an answer: they may have the task (made on first use). */
  private unsureChannels: Set<string> | undefined;
  /** Polls so far on this runner: the polling schedule grows with them. */
  private polls = 0;

  private readonly taskId: number;
  /** The account the task belongs to: its log is under `acct.<account>.`. */
  private readonly account: string;
  /** The task as its create submitted it (its first event's data). */
  private readonly command: TaskSubmittedEvent["data"];
  /** Its deadline (epoch ms), read once: every call and pause checks it. */
  private readonly deadlineAt: number;

  constructor(
    private readonly submitted: TaskSubmittedEvent,
    private readonly deps: TaskActorDeps,
  ) {
    this.taskId = submitted.meta.taskId;
    this.account = submitted.data.account;
    this.command = submitted.data;
    this.deadlineAt = Date.parse(submitted.data.deadlineAt);
  }

  private get log(): Logger {
    this.taskLogger ??= this.deps.log.child({ taskId: this.taskId });
    return this.taskLogger;
  }

  private get task() {
    return taskOf(this.state);
  }

  private get stopping(): boolean {
    return this.deps.shutdown.aborted;
  }

  /**
   * Ends the actor's waits and calls at once (the runner calls it on shutdown). The runner keeps its
   * actors and calls this, rather than each actor listening on a shared signal: an EventTarget checks
   * every listener it has on each add, so thousands of live tasks made each task start cost milliseconds.
   */
  stop(): void {
    this.end();
  }

  /** Aborts the call in progress and ends the current pause; later calls start aborted. */
  private end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.calling) this.calls?.abort(ACTOR_ENDED);
    this.wake?.();
  }

  /** Where the task stands, for metrics ("unsubmitted" counts as pending: that is what its customer sees). */
  progress(now: number): { state: "pending" | "running"; pastDeadline: boolean } {
    return { state: this.task.status === "running" ? "running" : "pending", pastDeadline: !isFinal(this.task) && now > this.deadlineAt };
  }

  /** How the task ended, once `run` returned "final". */
  outcome(): "success" | "failed" | undefined {
    const { status } = this.task;
    return status === "success" || status === "failed" ? status : undefined;
  }

  /**
   * Restores the task and submits it (or takes its slot back when an upstream accepted it already), then
   * polls until it waits. `redelivered`: another runner may have held the task (the first event was
   * delivered before).
   */
  start(redelivered: boolean): Promise<TaskActorStep> {
    return this.step(async () => {
      await this.restore(redelivered);
      this.firstHolder = !redelivered;
      if (isFinal(this.task)) return;
      // The task waits here, still pending, while every channel it may use is at its limit.
      const accepted = this.task.status === "pending" || this.task.status === "running" ? this.task.providerTaskId : undefined;
      if (accepted === undefined) await this.submitUpstream();
      else await this.takeSlot({ pinned: true });
    });
  }

  /** The task's next poll is due (or the upstream said there is news): asks the upstream, then polls on until it waits. */
  resume(): Promise<TaskActorStep> {
    return this.step(() => this.pollNow());
  }

  /** Runs `work`, then polls while the schedule says now; ends with the task's wait or its exit. */
  private async step(work: () => Promise<void>): Promise<TaskActorStep> {
    let waits = false;
    try {
      await work();
      while (!this.stopping && !isFinal(this.task)) {
        const pollAt = this.nextPollAt();
        if (pollAt > Date.now()) {
          waits = true;
          if (pollAt - Date.now() >= LONG_PAUSE_MS) this.dropIdleCallSignal();
          return { pollAt };
        }
        await this.pollNow();
      }
      if (this.stopping) return STOPPED;
      // The final event is in the log: settlement reacts to it (services/billing/settlement.ts).
      await this.forgetUpstream();
      return FINAL;
    } catch (error) {
      if (error instanceof ConcurrencyError) return { exit: await this.afterLostRace() };
      if (this.stopping) return STOPPED;
      throw error;
    } finally {
      if (!waits) {
        this.lease?.release();
        this.end();
      }
    }
  }

  /** The channel this task runs on (or will be asked about), for metrics and the channels report. */
  channel(): string {
    return this.lease?.channel ?? this.acceptedChannel() ?? this.command.job.provider;
  }

  /**
   * The upstream said there is news about this task (a callback): true when it should ask now instead of at
   * the next poll (a pause in progress ends here; a waiting task the runner resumes). At most one such call a
   * second: callbacks are unsigned, so a flood of them must not become a flood of calls.
   */
  pokeNow(): boolean {
    if ((this.task.status !== "pending" && this.task.status !== "running") || Date.now() - this.lastAskedAt < 1000) return false;
    this.wake?.();
    return true;
  }

  providerTaskId(): string | undefined {
    const task = this.task;
    return task.status === "unsubmitted" ? undefined : task.providerTaskId;
  }

  private acceptedChannel(): string | undefined {
    const task = this.task;
    return task.status === "unsubmitted" ? undefined : (task.channel ?? (task.providerTaskId === undefined ? undefined : this.command.job.provider));
  }

  /**
   * Waits (pending) for a slot: on the channel that accepted the task once it has one, otherwise on any of its
   * model's channels in rotation. Undefined when the deadline ended the task while it waited.
   */
  private async takeSlot(options: { pinned?: boolean; avoid?: string; on?: string } = {}): Promise<ChannelLease | undefined> {
    this.lease?.release();
    this.lease = undefined;
    const pinnedTo = options.on ?? (options.pinned ? (this.acceptedChannel() ?? this.command.job.provider) : undefined);
    const candidates = pinnedTo === undefined ? jobChannels(this.command.job) : [pinnedTo];
    const { avoid } = options;
    const acquireOptions = { pinned: pinnedTo !== undefined, ...(avoid === undefined ? {} : { avoid }) };
    this.lease = await this.withinDeadline((signal) => this.deps.channels.acquire(this.command.account, candidates, signal, acquireOptions));
    return this.lease;
  }

  /** The provider of the task's channel, for calls outside a held slot (cancel after the deadline, forget). */
  private providerOf(): VideoProvider | undefined {
    if (this.lease) return this.lease.provider;
    const channel = this.acceptedChannel();
    return channel === undefined ? undefined : this.deps.channels.provider(channel);
  }

  /**
   * Runs `call` bounded by the task's deadline (and by `limitMs`, a single call's timeout); past the
   * deadline, the task fails with its timeout reason. One timer per call, cleared after; the signal is the actor's (see `calls`).
   */
  private async withinDeadline<T>(call: (signal: AbortSignal) => Promise<T>, limitMs = Number.POSITIVE_INFINITY): Promise<T | undefined> {
    const remaining = this.deadlineAt - Date.now();
    if (remaining > 0) {
      const calls = this.callController();
      const timer = setTimeout(() => calls.abort(new DOMException("the call took too long", "TimeoutError")), Math.min(remaining, limitMs));
      this.calling = true;
      try {
        return await call(calls.signal);
      } catch (error) {
        if (this.ended || Date.now() < this.deadlineAt) throw error;
      } finally {
        this.calling = false;
        clearTimeout(timer);
      }
    }
    await this.timedOut();
    return undefined;
  }

  private callController(): AbortController {
    if (this.calls === undefined || this.calls.signal.aborted) {
      this.calls = new AbortController();
      if (this.ended) this.calls.abort(ACTOR_ENDED);
    }
    return this.calls;
  }

  /** One upstream call: within the deadline and within the provider's per-call timeout. */
  private call<T>(provider: VideoProvider, fn: (task: { signal: AbortSignal }) => Promise<T>): Promise<T | undefined> {
    return this.withinDeadline((signal) => fn({ signal }), provider.policy.timeoutMs);
  }

  private async timedOut(): Promise<void> {
    const submitCutShort = this.submitUnanswered;
    await this.execute({ type: "CheckDeadline", now: new Date(Math.max(Date.now(), this.deadlineAt)), maxTaskMs: this.deps.maxTaskMs });
    if (this.task.status === "failed") await this.cancelUpstream(this.task.providerTaskId, submitCutShort);
  }

  /**
   * Best effort, so the vendor stops (and stops charging us) for a task that ran out of time. A submit
   * that hung may still have created it: then the upstream's id is looked up by the client reference, and,
   * when the deadline cut the submit short, looked up again a few times (LATE_LOOKUP_PAUSES_MS) in case the
   * upstream registers it late. The slot is given back first: the look-ups need none.
   */
  private async cancelUpstream(known: string | undefined, submitCutShort = false): Promise<void> {
    const provider = this.providerOf();
    if (!provider?.cancel) return;
    const reference = clientReference(this.taskId);
    /** Cancels the known task, or the one found by reference; whether there was one. */
    const cancelOnce = async (): Promise<boolean> => {
      try {
        return await withSignal(NEVER_ABORTED, provider.policy.timeoutMs, async (signal) => {
          const providerTaskId = known ?? (await provider.findByClientReference?.({ taskId: this.taskId, job: this.command.job, clientReference: reference, signal }));
          if (providerTaskId !== undefined) await provider.cancel?.(this.accepted(providerTaskId, signal));
          return providerTaskId !== undefined;
        });
      } catch (error) {
        this.log.warn({ err: error }, "could not cancel the upstream task after its deadline");
        return false;
      }
    };
    const lateLookups = known === undefined && submitCutShort;
    if (lateLookups) {
      this.lease?.release();
      this.lease = undefined;
    }
    for (const pauseMs of lateLookups ? LATE_LOOKUP_PAUSES_MS : [0]) {
      if (pauseMs > 0) {
        await sleep(pauseMs, undefined, { signal: this.deps.shutdown }).catch(() => undefined);
        if (this.stopping) return;
      }
      if (await cancelOnce()) return;
    }
    if (lateLookups) this.log.warn({ reference }, "a submit the deadline cut short was not found upstream; if the upstream created it late, it runs on there");
  }

  private accepted(providerTaskId: string, signal: AbortSignal): AcceptedTask {
    return { taskId: this.taskId, job: this.command.job, clientReference: clientReference(this.taskId), providerTaskId, signal };
  }

  /**
   * Submits on a channel with room. Passing trouble backs off and may move the task to another channel; a
   * channel that refuses our key, quota or account leaves the rotation and the task tries the others; it fails
   * (free) only when none is left in rotation.
   */
  private async submitUpstream(): Promise<void> {
    const reference = clientReference(this.taskId);
    let decided = false;
    let avoid: string | undefined;
    for (let attempt = 0; !decided && !isFinal(this.task) && !this.stopping; attempt++) {
      const channels = jobChannels(this.command.job);
      if (!this.deps.channels.anyInRotation(channels)) {
        this.log.error({ channels }, "no channel of this model is in rotation: the task fails; see reelay channels");
        await this.execute({ type: "RecordRejection", reason: MISCONFIGURED, detail: `no channel in rotation among ${channels.join(", ")}` });
        break;
      }
      const lease = await this.takeSlot(avoid === undefined ? {} : { avoid });
      if (lease === undefined) return; // the deadline ended the task while it waited
      const { provider, channel } = lease;
      try {
        // An attempt that may follow an earlier submit asks the upstreams first: after a crash every channel
        // of the model, otherwise those where a submit got no answer (one that answered an error created nothing).
        const found = this.firstHolder && this.unsureChannels === undefined ? undefined : await this.findEarlierSubmit(this.firstHolder ? [...(this.unsureChannels ?? [])] : undefined);
        // Found on another channel: the task is that channel's from now on, and waits for a slot there.
        if (found && found.channel !== channel && (await this.takeSlot({ on: found.channel })) === undefined) return;
        const accepted =
          found ??
          (await this.call(provider, async ({ signal }) => {
            await lease.submitTurn(signal);
            // Cleared once the upstream answers; a submit the deadline cuts short leaves it set (see timedOut).
            this.submitUnanswered = true;
            const { providerTaskId } = await provider.submit({ taskId: this.taskId, job: this.command.job, clientReference: reference, signal });
            this.submitUnanswered = false;
            return { channel, providerTaskId };
          }));
        if (accepted === undefined) return; // the deadline ended the task
        // The creating edge learns the upstream's id from this event (its feed of the task log).
        await this.execute({ type: "RecordAcceptance", providerTaskId: accepted.providerTaskId, channel: accepted.channel });
        decided = true;
      } catch (error) {
        this.submitUnanswered = false;
        if (error instanceof ConcurrencyError || this.stopping) throw error;
        if (error instanceof ProviderRejected) {
          await this.execute({ type: "RecordRejection", reason: error.message, detail: error.message });
          decided = true;
        } else if (error instanceof ProviderMisconfigured) {
          this.deps.channels.sideline(channel, error.message);
          avoid = channel;
        } else {
          this.log.warn({ err: error, attempt, channel }, "upstream submit failed; retrying until the deadline");
          if (!(error instanceof ProviderUnavailable && error.refused)) (this.unsureChannels ??= new Set()).add(channel);
          this.deps.channels.noteTransient(channel, (error as Error).message);
          avoid = channel;
          // The slot is given back while the task backs off: another task (or channel) can use it.
          this.lease?.release();
          this.lease = undefined;
          await this.pause(retryDelay(attempt, error instanceof ProviderUnavailable ? error.retryAfterMs : undefined));
        }
      }
    }
  }

  /**
   * After an intent without an acceptance (a crash in between), an upstream may already have the task. A
   * channel that refuses our key cannot have it: it leaves the rotation and the others are asked. Passing
   * trouble is thrown: until every channel could answer, nothing may be submitted again.
   */
  private async findEarlierSubmit(only?: readonly string[]): Promise<{ channel: string; providerTaskId: string } | undefined> {
    const task = this.task;
    if (task.status !== "pending" || task.clientReference === undefined) return undefined;
    const reference = task.clientReference;
    for (const channel of only ?? jobChannels(this.command.job)) {
      const provider = this.deps.channels.provider(channel);
      const find = provider?.findByClientReference?.bind(provider);
      if (!provider || !find || !this.deps.channels.anyInRotation([channel])) continue;
      try {
        const providerTaskId = await this.call(provider, ({ signal }) => find({ taskId: this.taskId, job: this.command.job, clientReference: reference, signal }));
        if (providerTaskId !== undefined) return { channel, providerTaskId };
      } catch (error) {
        if (!(error instanceof ProviderMisconfigured)) throw error;
        this.deps.channels.sideline(channel, error.message);
      }
    }
    return undefined;
  }

  /** When to ask the upstream next: `pollDelay` after the last poll, never past the deadline. */
  private nextPollAt(): number {
    const policy = this.lease?.provider.policy;
    return Math.min(Date.now() + (policy ? pollDelay(policy, this.polls) : 0), this.deadlineAt);
  }

  /** A poll that is due: past the deadline the task times out instead. */
  private async pollNow(): Promise<void> {
    this.polls++;
    if (this.stopping || isFinal(this.task)) return;
    if (Date.now() >= this.deadlineAt) await this.timedOut();
    else await this.pollOnce();
  }

  private async pollOnce(): Promise<void> {
    const task = this.task;
    if (task.status !== "pending" && task.status !== "running") return;
    const providerTaskId = task.providerTaskId;
    const provider = this.lease?.provider;
    if (providerTaskId === undefined || provider === undefined) return;
    try {
      this.lastAskedAt = Date.now();
      const status = await this.call(provider, ({ signal }) => provider.status(this.accepted(providerTaskId, signal)));
      if (status !== undefined) await this.execute({ type: "RecordReport", report: await this.reportOf(status, providerTaskId) });
    } catch (error) {
      if (error instanceof ConcurrencyError || this.stopping) throw error;
      if (error instanceof ProviderMisconfigured) {
        this.log.error({ err: error }, "provider misconfigured: the task fails; fix the provider entry");
        if (this.lease) this.deps.channels.sideline(this.lease.channel, error.message);
        await this.execute({ type: "RecordReport", report: { state: "failed", reason: MISCONFIGURED, detail: error.message } });
        return;
      }
      // A flaky upstream is not a failed task: ask again on schedule until the deadline says otherwise.
      this.log.warn({ err: error }, "upstream status call failed; will ask again");
      if (this.lease) this.deps.channels.noteTransient(this.lease.channel, (error as Error).message);
      if (error instanceof ProviderUnavailable && error.retryAfterMs) await this.pause(error.retryAfterMs);
    }
    // Not when the call above already timed the task out: a second cancel would delete the cancelled task's
    // record at the upstream (Ark removes a cancelled task on DELETE).
    if (Date.now() >= this.deadlineAt && !isFinal(this.task)) await this.timedOut();
  }

  private async reportOf(status: ProviderStatus, providerTaskId: string): Promise<ProviderReport> {
    if (status.state !== "succeeded") return status;
    const video = await this.copyWithRetries(status, providerTaskId);
    if (video === undefined || "reason" in video) return video ?? { state: "queued" };
    const { job } = this.command;
    return {
      state: "succeeded",
      video,
      durationSeconds: status.durationSeconds ?? job.durationSeconds,
      resolution: status.resolution ?? `${job.width}*${job.height}`,
      totalTokens: billedTokens(status, job),
      ...(status.usageTokens === undefined ? {} : { upstreamTokens: status.usageTokens }),
      ...(status.upstreamUsage === undefined ? {} : { upstreamUsage: status.upstreamUsage }),
    };
  }

  /** The copy is a step of its own: passing trouble (a NATS hiccup, a dropped download) is retried until the deadline. */
  private async copyWithRetries(status: Extract<ProviderStatus, { state: "succeeded" }>, providerTaskId: string) {
    for (let attempt = 0; !this.stopping; attempt++) {
      // Only this runner's first copy of a task nobody held before writes without looking for an older object.
      const isNew = this.firstHolder && !this.copyStarted;
      this.copyStarted = true;
      try {
        return await this.withinDeadline((signal) =>
          copyResult(status.result, videoObjectName(this.deps.videoNameKey, this.taskId), {
            videos: this.deps.videos,
            ...(isNew ? { newIn: this.deps.videoBucket } : {}),
            maxBytes: this.deps.maxResultBytes,
            allowPrivateAddresses: this.deps.allowPrivateResultAddresses,
            signal,
          }),
        );
      } catch (error) {
        if (error instanceof ResultGone && !this.askedForFreshResult) {
          // Pre-signed addresses expire (Ark's after 24 h): a new status answer signs a new one.
          this.askedForFreshResult = true;
          this.log.warn({ err: error }, "the result address expired; asking the upstream for a fresh one");
          return undefined;
        }
        if (error instanceof ResultUnusable) return { state: "failed" as const, reason: error.message, detail: `${providerTaskId}: ${error.message}` };
        if (this.stopping) throw error;
        this.log.warn({ err: error, attempt }, "copying the result failed; retrying until the deadline");
        await this.pause(retryDelay(attempt));
      }
    }
    return undefined;
  }

  /** A task that waits long keeps no signal meanwhile (thousands of waiting tasks would each hold one); the next call makes a new one. */
  private dropIdleCallSignal(): void {
    if (!this.calling) this.calls = undefined;
  }

  /** Waits `ms` before a retry (not past the deadline); ending the actor (`end`) or news from the upstream wakes it early. */
  private async pause(ms: number): Promise<void> {
    if (ms >= LONG_PAUSE_MS) this.dropIdleCallSignal();
    const until = Math.min(Date.now() + ms, this.deadlineAt);
    if (until > Date.now() && !this.ended) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.wake = undefined;
          resolve();
        }, until - Date.now());
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    if (this.stopping) return;
    if (Date.now() >= this.deadlineAt && !isFinal(this.task)) await this.timedOut();
  }

  private async forgetUpstream(): Promise<void> {
    const task = this.task;
    const provider = this.providerOf();
    if (task.status === "unsubmitted" || task.providerTaskId === undefined || !provider?.forget) return;
    const forget = provider.forget.bind(provider);
    const providerTaskId = task.providerTaskId;
    const channel = this.lease?.channel ?? this.acceptedChannel();
    await withSignal(NEVER_ABORTED, 5_000, (signal) => forget(this.accepted(providerTaskId, signal))).catch((error: unknown) => {
      if (channel !== undefined) this.deps.channels.cleanupFailed(channel, (error as Error).message);
    });
  }

  private async restore(redelivered: boolean): Promise<void> {
    // A first delivery has no later events yet: no read; the append fence catches the rare surprise.
    const history = redelivered ? await this.deps.taskLog.read(this.account, this.taskId) : { events: [this.submitted], lastSequence: 0 };
    this.lastSequence = history.lastSequence;
    this.state = foldTask(history.events);
  }

  /** Decide, then append each event at the next position of the task's log and keep the state it was decided to lead to. */
  private async execute(command: TaskCommand): Promise<void> {
    for (const { event, after } of decideTaskSteps(command, this.state)) {
      if (this.stopping) return;
      const appended = await this.deps.taskLog.append(this.account, this.taskId, event, after.version, this.lastSequence);
      this.lastSequence = appended.sequence;
      // What the machine decided is what it would make of the appended event (it never reads an event's meta).
      this.state = after;
      this.appended(appended.event);
    }
  }

  private appended(event: TaskEvent): void {
    if (event.type === "GenerationFailed" && event.data.detail) this.log.warn({ reason: event.data.reason, detail: event.data.detail }, "task failed");
    if (this.deps.log.isLevelEnabled("debug")) this.log.debug({ event: event.type, state: this.task.status }, "task event appended");
  }

  private async afterLostRace(): Promise<TaskActorExit> {
    // Our own work on it (a render, a download) stops here; the other runner carries the task on.
    this.end();
    const history = await this.deps.taskLog.read(this.account, this.taskId);
    this.state = foldTask(history.events);
    this.log.info({ state: this.task.status }, "another runner wrote to this task; stepping aside");
    return isFinal(this.task) ? "final" : "steppedAside";
  }
}

