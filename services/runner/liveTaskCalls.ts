import { setTimeout as sleep } from "node:timers/promises";
import { clientReference, jobChannels, type VideoJobSpec } from "../../contracts/videoTask.ts";
import type { LiveTaskEffect, LiveTaskEvent } from "../../machines/liveTaskTypes.ts";
import { decideTaskSteps, foldTask, type TaskDeciderState } from "../../machines/videoTaskDecider.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import type { Logger } from "../shared/log.ts";
import { callFailureOf } from "./callFailure.ts";
import type { LiveTaskDeps } from "./liveTaskDeps.ts";
import type { ChannelLease } from "./policy/channelPool.ts";
import { ProviderMisconfigured, type AcceptedTask } from "./providers/types.ts";
import { copyResult } from "./resultCopy.ts";
import { withSignal } from "./scopedSignal.ts";
import { videoObjectName } from "./videoNames.ts";

/**
 * After a submit the deadline cut short, the upstream may still register the task a little later (the
 * request was sent): it is looked up again after these pauses, and cancelled when found.
 */
const LATE_LOOKUP_PAUSES_MS = [0, 1_000, 5_000, 30_000];
/** For calls that must finish even when the actor ends (cancel, forget): bounded by their own timeout only. */
const NEVER_ABORTED = new AbortController().signal;

/** What the calls of one live task need from its interpreter (services/runner/liveTask.ts). */
export interface TaskCalls {
  readonly deps: LiveTaskDeps;
  readonly taskId: number;
  readonly account: string;
  readonly job: VideoJobSpec;
  readonly log: Logger;
  /** The task's log as the machine last knew it, and its last position. */
  readonly decided: TaskDeciderState;
  readonly sequence: number;
  lease: ChannelLease | undefined;
  /** When the task runs out of time (epoch ms). */
  readonly deadlineAt: number;
  /** Runs `call` bounded by the task's deadline and `limitMs`; undefined when the deadline cut it short. */
  bounded<T>(call: (signal: AbortSignal) => Promise<T>, limitMs?: number): Promise<T | undefined>;
}

const DEADLINE: LiveTaskEvent = { type: "DEADLINE" };
const DONE: LiveTaskEvent = { type: "DONE" };

/** Runs one effect the machine asked for; the event is its answer (undefined: the effect needs none). */
export async function runCall(task: TaskCalls, effect: LiveTaskEffect): Promise<LiveTaskEvent | undefined> {
  try {
    return await answer(task, effect);
  } catch (error) {
    if (error instanceof ConcurrencyError) return { type: "LOST_RACE" };
    return { type: "FAILED", failure: callFailureOf(error) };
  }
}

async function answer(task: TaskCalls, effect: LiveTaskEffect): Promise<LiveTaskEvent | undefined> {
  const { deps } = task;
  switch (effect.do) {
    case "readLog": {
      const history = await deps.taskLog.read(task.account, task.taskId);
      return { type: "LOG_READ", task: foldTask(history.events), sequence: history.lastSequence };
    }
    case "acquire": {
      const candidates = acquireCandidates(task, effect);
      if (effect.on === undefined && !deps.channels.anyInRotation(candidates)) return { type: "NO_CHANNEL", channels: candidates };
      const askedAt = Date.now();
      const lease = await task.bounded((signal) => deps.channels.acquire(task.account, candidates, signal, acquireOptions(effect)));
      if (lease === undefined) return DEADLINE;
      task.lease = lease;
      return { type: "SLOT", channel: lease.channel, policy: lease.provider.policy, waitedMs: Date.now() - askedAt };
    }
    case "find":
      return await findEarlierSubmit(task, effect.channels ?? jobChannels(task.job));
    case "submit": {
      const lease = requireLease(task);
      const submitted = await task.bounded(async (signal) => {
        await lease.submitTurn(signal);
        return lease.provider.submit({ taskId: task.taskId, job: task.job, clientReference: clientReference(task.taskId), signal });
      }, lease.provider.policy.timeoutMs);
      return submitted === undefined ? DEADLINE : { type: "SUBMITTED", providerTaskId: submitted.providerTaskId };
    }
    case "status": {
      const { provider } = requireLease(task);
      const status = await task.bounded((signal) => provider.status(accepted(task, effect.providerTaskId, signal)), provider.policy.timeoutMs);
      return status === undefined ? DEADLINE : { type: "STATUS", status };
    }
    case "restart": {
      const { provider } = requireLease(task);
      if (!provider.restart) throw new Error("the upstream cannot start a lost task again");
      const restart = provider.restart.bind(provider);
      const done = await task.bounded(async (signal) => (await restart(accepted(task, effect.providerTaskId, signal)), true), provider.policy.timeoutMs);
      return done === undefined ? DEADLINE : { type: "RESTARTED" };
    }
    case "copy": {
      const name = videoObjectName(deps.videoNameKey, task.taskId);
      const options = { videos: deps.videos, ...(effect.isNew ? { newIn: deps.videoBucket } : {}), maxBytes: deps.maxResultBytes, allowPrivateAddresses: deps.allowPrivateResultAddresses };
      const video = await task.bounded((signal) => copyResult(effect.status.result, name, { ...options, signal }));
      return video === undefined ? DEADLINE : { type: "COPIED", video };
    }
    case "append":
      return await append(task, effect.command);
    case "cancel":
      await cancelUpstream(task, effect);
      return DONE;
    case "forget":
      await forgetUpstream(task, effect);
      return DONE;
    case "release":
    case "sideline":
    case "noteTransient":
    case "warn":
      throw new Error(`${effect.do} is not a call`);
  }
}

/**
 * The answer to an `acquire` when the pool grants a slot at once (ChannelPool.grantNow: nobody waits), without
 * the call's promises; undefined: the effect runs as a call (it waits, or answers NO_CHANNEL or DEADLINE).
 */
export function slotAtOnce(task: TaskCalls, effect: Extract<LiveTaskEffect, { do: "acquire" }>): Extract<LiveTaskEvent, { type: "SLOT" }> | undefined {
  if (Date.now() >= task.deadlineAt) return undefined;
  const lease = task.deps.channels.grantNow(task.account, acquireCandidates(task, effect), acquireOptions(effect));
  if (lease === undefined) return undefined;
  task.lease = lease;
  return { type: "SLOT", channel: lease.channel, policy: lease.provider.policy, waitedMs: 0 };
}

/** The channels an `acquire` may be served on: the one that accepted the task, or any of its model's. */
const acquireCandidates = (task: TaskCalls, effect: Extract<LiveTaskEffect, { do: "acquire" }>): readonly string[] => (effect.on === undefined ? jobChannels(task.job) : [effect.on]);

const acquireOptions = (effect: Extract<LiveTaskEffect, { do: "acquire" }>): { pinned: boolean; avoid?: string } => ({ pinned: effect.on !== undefined, ...(effect.avoid === undefined ? {} : { avoid: effect.avoid }) });

/** Decide, then append each event at the next position of the task's log; the state the decider led to is the answer. */
async function append(task: TaskCalls, command: Parameters<typeof decideTaskSteps>[0]): Promise<LiveTaskEvent | undefined> {
  let state = task.decided;
  let sequence = task.sequence;
  for (const { event, after } of decideTaskSteps(command, task.decided)) {
    if (task.deps.shutdown.aborted) return undefined;
    const appended = await task.deps.taskLog.append(task.account, task.taskId, event, after.version, sequence);
    sequence = appended.sequence;
    // What the machine decided is what it would make of the appended event (it never reads an event's meta).
    state = after;
    if (appended.event.type === "GenerationFailed" && appended.event.data.detail) task.log.warn({ reason: appended.event.data.reason, detail: appended.event.data.detail }, "task failed");
  }
  return { type: "APPENDED", task: state, sequence };
}

function requireLease(task: TaskCalls): ChannelLease {
  if (task.lease === undefined) throw new Error(`task ${task.taskId}: an upstream call without a slot`);
  return task.lease;
}

const accepted = (task: TaskCalls, providerTaskId: string, signal: AbortSignal): AcceptedTask => ({
  taskId: task.taskId,
  job: task.job,
  clientReference: clientReference(task.taskId),
  providerTaskId,
  signal,
});

/**
 * After an intent without an acceptance (a crash in between), an upstream may already have the task. A
 * channel that refuses our key cannot have it: it leaves the rotation and the others are asked. Passing
 * trouble is thrown: until every channel could answer, nothing may be submitted again.
 */
async function findEarlierSubmit(task: TaskCalls, channels: readonly string[]): Promise<LiveTaskEvent> {
  const { channels: pool } = task.deps;
  for (const channel of channels) {
    const provider = pool.provider(channel);
    const find = provider?.findByClientReference?.bind(provider);
    if (!provider || !find || !pool.anyInRotation([channel])) continue;
    try {
      const asked = await task.bounded(async (signal) => ({ found: await find({ taskId: task.taskId, job: task.job, clientReference: clientReference(task.taskId), signal }) }), provider.policy.timeoutMs);
      if (asked === undefined) return DEADLINE;
      if (asked.found !== undefined) return { type: "FOUND", channel, providerTaskId: asked.found };
    } catch (error) {
      if (!(error instanceof ProviderMisconfigured)) throw error;
      pool.sideline(channel, error.message);
    }
  }
  return { type: "NOT_FOUND" };
}

/**
 * Best effort, so the vendor stops (and stops charging us) for a task that ran out of time. A submit
 * that hung may still have created it: then the upstream's id is looked up by the client reference, and,
 * when the deadline cut the submit short, looked up again a few times (LATE_LOOKUP_PAUSES_MS) in case the
 * upstream registers it late.
 */
async function cancelUpstream(task: TaskCalls, { providerTaskId: known, channel, submitCutShort }: Extract<LiveTaskEffect, { do: "cancel" }>): Promise<void> {
  const provider = channel === undefined ? undefined : task.deps.channels.provider(channel);
  if (!provider?.cancel) return;
  const reference = clientReference(task.taskId);
  const cancelOnce = async (): Promise<boolean> => {
    try {
      return await withSignal(NEVER_ABORTED, provider.policy.timeoutMs, async (signal) => {
        const providerTaskId = known ?? (await provider.findByClientReference?.({ taskId: task.taskId, job: task.job, clientReference: reference, signal }));
        if (providerTaskId !== undefined) await provider.cancel?.(accepted(task, providerTaskId, signal));
        return providerTaskId !== undefined;
      });
    } catch (error) {
      task.log.warn({ err: error }, "could not cancel the upstream task after its deadline");
      return false;
    }
  };
  const lateLookups = known === undefined && submitCutShort;
  for (const pauseMs of lateLookups ? LATE_LOOKUP_PAUSES_MS : [0]) {
    if (pauseMs > 0) {
      await sleep(pauseMs, undefined, { signal: task.deps.shutdown }).catch(() => undefined);
      if (task.deps.shutdown.aborted) return;
    }
    if (await cancelOnce()) return;
  }
  if (lateLookups) task.log.warn({ reference }, "a submit the deadline cut short was not found upstream; if the upstream created it late, it runs on there");
}

/** The runner is done with the task: the provider frees what it keeps for it (a local render's file). */
async function forgetUpstream(task: TaskCalls, { providerTaskId, channel }: Extract<LiveTaskEffect, { do: "forget" }>): Promise<void> {
  const provider = task.deps.channels.provider(channel);
  if (!provider?.forget) return;
  const forget = provider.forget.bind(provider);
  await withSignal(NEVER_ABORTED, 5_000, (signal) => forget(accepted(task, providerTaskId, signal))).catch((error: unknown) => {
    task.deps.channels.cleanupFailed(channel, (error as Error).message);
  });
}
