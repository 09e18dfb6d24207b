import { describe, expect, it, vi } from "vitest";
import type { TaskEvent, TaskSubmittedEvent } from "../contracts/videoTask.ts";
import { OBJECT_STORES } from "../infra/jetstreamLayout.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { LiveTaskActor } from "../services/runner/liveTask.ts";
import type { LiveTaskDeps } from "../services/runner/liveTaskDeps.ts";
import type { LiveTaskExit } from "../machines/liveTaskTypes.ts";
import type { VideoProvider } from "../services/runner/providers/types.ts";
import { ChannelPool } from "../services/runner/policy/channelPool.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";
import { silentLog } from "./helpers/testApp.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";
import { readTask } from "./helpers/taskReads.ts";
import { openTask } from "./helpers/openTask.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";

/** An upstream that never answers a submit with a decision: every call fails as a network error would. */
function failingUpstream(): VideoProvider & { submits: number } {
  const provider = {
    submits: 0,
    policy: { pollFirstAfterMs: 0, pollEveryMs: 20, pollMaxEveryMs: 20, maxInFlight: 10, submitsPerSecond: 0, timeoutMs: 1_000 },
    submit: async () => {
      provider.submits++;
      throw new Error("connect ECONNRESET");
    },
    status: async () => ({ state: "queued" as const }),
    close: async () => undefined,
  };
  return provider;
}

/** An upstream that accepts, then never answers a status call: each one hangs until its signal aborts. */
function hangingStatusUpstream(): VideoProvider & { cancels: string[] } {
  const provider = {
    cancels: [] as string[],
    policy: { pollFirstAfterMs: 0, pollEveryMs: 20, pollMaxEveryMs: 20, maxInFlight: 10, submitsPerSecond: 0, timeoutMs: 60_000 },
    submit: async () => ({ providerTaskId: "hung-1" }),
    status: ({ signal }: { signal: AbortSignal }) =>
      new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true })),
    cancel: async ({ providerTaskId }: { providerTaskId: string }) => void provider.cancels.push(providerTaskId),
    close: async () => undefined,
  };
  return provider;
}

/**
 * An upstream whose submit hangs and is registered anyway, found by its reference only from the second look-up
 * on. The deadline's timer fires a moment early by the wall clock (libuv's cached loop time makes that common):
 * when the submit's signal aborts, the clock reads just before the deadline while the abort is handled.
 */
function lateRegisteringUpstream(): VideoProvider & { lookUps: number; cancels: string[] } {
  const provider = {
    lookUps: 0,
    cancels: [] as string[],
    policy: { pollFirstAfterMs: 0, pollEveryMs: 20, pollMaxEveryMs: 20, maxInFlight: 10, submitsPerSecond: 0, timeoutMs: 60_000 },
    submit: ({ signal }: { signal: AbortSignal }) =>
      new Promise<never>((_, reject) =>
        signal.addEventListener(
          "abort",
          () => {
            const wallClock = Date.now.bind(Date);
            const early = vi.spyOn(Date, "now").mockImplementation(() => wallClock() - 5);
            setTimeout(() => early.mockRestore(), 20);
            reject(signal.reason);
          },
          { once: true },
        ),
      ),
    findByClientReference: async () => (++provider.lookUps >= 2 ? "late-1" : undefined),
    status: async () => ({ state: "queued" as const }),
    cancel: async ({ providerTaskId }: { providerTaskId: string }) => void provider.cancels.push(providerTaskId),
    close: async () => undefined,
  };
  return provider;
}

describe("a live task actor on NATS", () => {
  const suite = natsPerSuite("actor-deadline", 5_000);

  /** The job's provider as the runner's only channel. */
  const onlyChannel = (provider: VideoProvider) =>
    new ChannelPool(new Map([[job.provider, { kind: "custom", provider, weight: 1, coolDownMs: 60_000 }]]), { store: suite.nats.fleet, runner: "actor-test", leaseMs: 5_000 }, silentLog);

  /** Writes the task's first event, as the edge's create does. */
  async function created(taskId: number, maxTaskMs: number): Promise<TaskSubmittedEvent> {
    const deadlineAt = new Date(Date.now() + maxTaskMs).toISOString();
    return openTask(new AccountLedger(suite.nats), "acme", taskId, { job, maxTaskMs: Date.parse(deadlineAt) - Date.now() });
  }

  /** The actor's exit, as RunnerService hears it. */
  const exits = new Map<LiveTaskActor, (exit: LiveTaskExit) => void>();
  const hooks = {
    exited: (actor: LiveTaskActor, exit: LiveTaskExit) => exits.get(actor)?.(exit),
    crashed: (_actor: LiveTaskActor, error: unknown) => {
      throw error;
    },
    run: <T>(_actor: LiveTaskActor, call: () => Promise<T>) => call(),
  };

  function runToExit(actor: LiveTaskActor, redelivered: boolean): Promise<LiveTaskExit> {
    const exit = new Promise<LiveTaskExit>((resolve) => exits.set(actor, resolve));
    actor.start(redelivered);
    return exit;
  }

  const actorFor = (submitted: TaskSubmittedEvent, provider: VideoProvider, shutdown: AbortSignal, maxTaskMs = 10_000) =>
    new LiveTaskActor(
      submitted,
      {
        videos: suite.nats.videos,
        videoBucket: { nc: suite.nats.nc, js: suite.nats.js, jsm: suite.nats.jsm, name: OBJECT_STORES.videos },
        videoNameKey: Buffer.alloc(32, 7),
        log: silentLog,
        taskLog: new TaskLog(suite.nats.js, suite.nats.jsm),
        channels: onlyChannel(provider),
        maxTaskMs,
        maxResultBytes: 1_000_000,
        allowPrivateResultAddresses: true,
        shutdown,
      },
      hooks,
    );

  it("after dying between the upstream's create and recording it, finds the upstream task instead of creating a second", async () => {
    const vendor = new ScriptedVendor();
    vendor.scriptSubmits("hang");
    const firstRunner = new AbortController();
    const submitted = await created(42, 10_000);
    const firstActor = actorFor(submitted, vendor, firstRunner.signal);
    const first = runToExit(firstActor, false);
    await expect.poll(() => vendor.submits.length).toBe(1);
    // The runner goes away while the upstream's answer is in flight (as RunnerService.stop does it).
    firstRunner.abort();
    firstActor.stop();
    expect(await first).toBe("stopped");

    expect(await runToExit(actorFor(submitted, vendor, new AbortController().signal), true)).toBe("final");
    expect(vendor.submits).toHaveLength(1);
    const { events } = await readTask(suite.nats, 42);
    expect(events.map((event: TaskEvent) => event.type)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationSucceeded"]);
    expect(events[1]?.data).toEqual({ providerTaskId: vendor.submits[0], channel: job.provider });
  });

  it("retries a submit that keeps failing until the deadline, then fails with a timeout reason and is queued for release", async () => {
    const taskLog = new TaskLog(suite.nats.js, suite.nats.jsm);
    const upstream = failingUpstream();
    const deps: LiveTaskDeps = {
      videos: suite.nats.videos,
      videoBucket: { nc: suite.nats.nc, js: suite.nats.js, jsm: suite.nats.jsm, name: OBJECT_STORES.videos },
      videoNameKey: Buffer.alloc(32, 7),
      log: silentLog,
      taskLog,
      channels: onlyChannel(upstream),
      maxTaskMs: 1_500,
      maxResultBytes: 1_000_000,
      allowPrivateResultAddresses: true,
      shutdown: new AbortController().signal,
    };
    const actor = new LiveTaskActor(await created(41, 1_500), deps, hooks);

    expect(await runToExit(actor, false)).toBe("final");

    expect(upstream.submits).toBeGreaterThan(1);
    const { events } = await taskLog.read("acme", 41);
    expect(events.map((event: TaskEvent) => event.type)).toEqual(["TaskSubmitted", "GenerationFailed"]);
    expect(events[1]?.data).toEqual({ reason: "timed out: not finished within 1.5 seconds", stage: "timeout" });
  });

  it("may be handed back while it waits for its first slot, and not once it holds one or the upstream has it", async () => {
    const upstream = { ...hangingStatusUpstream(), policy: { pollFirstAfterMs: 0, pollEveryMs: 20, pollMaxEveryMs: 20, maxInFlight: 1, submitsPerSecond: 0, timeoutMs: 60_000 } };
    const deps: LiveTaskDeps = {
      videos: suite.nats.videos,
      videoBucket: { nc: suite.nats.nc, js: suite.nats.js, jsm: suite.nats.jsm, name: OBJECT_STORES.videos },
      videoNameKey: Buffer.alloc(32, 7),
      log: silentLog,
      taskLog: new TaskLog(suite.nats.js, suite.nats.jsm),
      channels: onlyChannel(upstream),
      maxTaskMs: 10_000,
      maxResultBytes: 1_000_000,
      allowPrivateResultAddresses: true,
      shutdown: new AbortController().signal,
    };
    const polled = new LiveTaskActor(await created(44, 10_000), deps, hooks);
    const polledExit = runToExit(polled, false);
    await expect.poll(() => polled.providerTaskId()).toBe("hung-1");
    const waiting = new LiveTaskActor(await created(45, 10_000), deps, hooks);
    const waitingExit = runToExit(waiting, false);

    await expect.poll(() => waiting.evictable()).toBe(true);
    expect(polled.evictable()).toBe(false);

    polled.stop();
    waiting.stop();
    expect([await polledExit, await waitingExit]).toEqual(["stopped", "stopped"]);
  });

  it("cancels the upstream task once when the deadline cuts a status call short", async () => {
    const upstream = hangingStatusUpstream();
    const actor = actorFor(await created(43, 400), upstream, new AbortController().signal, 400);
    expect(await runToExit(actor, false)).toBe("final");
    const { events } = await readTask(suite.nats, 43);
    expect(events.map((event: TaskEvent) => event.type)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationFailed"]);
    // A second cancel would delete the cancelled task's record at vendors like Ark.
    expect(upstream.cancels).toEqual(["hung-1"]);
  });

  it("takes a submit that its deadline's timer aborted as cut short by the deadline, even when the clock reads a moment before it: the late look-ups find and cancel the upstream task", async () => {
    const upstream = lateRegisteringUpstream();
    const actor = actorFor(await created(46, 400), upstream, new AbortController().signal, 400);
    expect(await runToExit(actor, false)).toBe("final");
    const { events } = await readTask(suite.nats, 46);
    expect(events.at(-1)?.type).toBe("GenerationFailed");
    expect(upstream.cancels).toEqual(["late-1"]);
  });

  it("starts no upstream call in the last moments before the deadline, where a timer meant for just past it can fire: the call is cut short unmade", async () => {
    const submitted = await created(47, 10_000);
    const upstream = failingUpstream();
    const nearDeadline = (ms: number) => actorFor({ ...submitted, data: { ...submitted.data, deadlineAt: new Date(Date.now() + ms).toISOString() } }, upstream, new AbortController().signal);
    let made = 0;
    const call = async () => ++made;
    expect(await nearDeadline(30).bounded(call)).toBeUndefined();
    expect(made).toBe(0);
    expect(await nearDeadline(5_000).bounded(call)).toBe(1);
  });
});
