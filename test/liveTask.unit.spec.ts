import { TimeoutError } from "@nats-io/transport-node";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { StoredVideo } from "../contracts/videoTask.ts";
import { callFailureOf } from "../services/runner/callFailure.ts";
import { ProviderUnavailable, UpstreamLost } from "../services/runner/providers/types.ts";
import { appendOf, givenLiveTask, POLICY } from "./helpers/liveTaskSpec.ts";

const VIDEO: StoredVideo = { object: "v.mp4", bytes: 10, contentType: "video/mp4" };
const DONE_UPSTREAM = { state: "succeeded" as const, result: { kind: "url" as const, url: "https://cdn.example/v.mp4" } };
const slot = (waitedMs = 0) => ({ type: "SLOT" as const, channel: "local", policy: POLICY, waitedMs });
const failure = (error: unknown) => ({ type: "FAILED" as const, failure: callFailureOf(error) });
const natsTimeout = () => new TimeoutError();
const does = (effects: readonly { do: string }[]) => effects.map((effect) => effect.do);

/** A task accepted upstream and polled: its log after the acceptance, the machine waiting for its first poll. */
function acceptedAndWaiting() {
  const spec = givenLiveTask().start();
  spec.effects();
  spec.when(slot()).when({ type: "SUBMITTED", providerTaskId: "up-1" });
  spec.when(spec.appended(appendOf(spec.effects())));
  return spec;
}

describe("the live task machine (no NATS: given a log, when the provider answers, then these effects)", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date("2026-11-27T00:00:00Z") });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("given a fresh task, when a slot is free and the upstream accepts then succeeds, then it submits once, polls on schedule, copies once and ends final", () => {
    const spec = givenLiveTask().start();
    // A first delivery reads nothing: no other runner can have had the task.
    expect(spec.effects()).toEqual([{ do: "acquire" }]);
    spec.when(slot());
    expect(spec.effects()).toEqual([{ do: "submit" }]);
    spec.when({ type: "SUBMITTED", providerTaskId: "up-1" });
    const acceptance = appendOf(spec.effects());
    expect(acceptance).toEqual({ type: "RecordAcceptance", providerTaskId: "up-1", channel: "local" });
    spec.when(spec.appended(acceptance));
    expect(spec.effects()).toEqual([]);
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    expect(spec.effects()).toEqual([{ do: "status", providerTaskId: "up-1" }]);
    spec.when({ type: "STATUS", status: DONE_UPSTREAM });
    expect(spec.effects()).toEqual([{ do: "copy", status: DONE_UPSTREAM, isNew: true }]);
    spec.when({ type: "COPIED", video: VIDEO });
    spec.when(spec.appended(appendOf(spec.effects())));
    expect(spec.log.map((event) => event.type)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationSucceeded"]);
    expect(does(spec.effects())).toEqual(["release", "forget"]);
    spec.when({ type: "DONE" });
    expect(spec.exit()).toBe("final");
  });

  it("given a fresh task that holds a slot from its start (the runner had one free, nobody waited), then it submits at once and records the acceptance on that channel", () => {
    const spec = givenLiveTask({ slotAtStart: true }).start();
    expect(spec.effects()).toEqual([{ do: "submit" }]);
    spec.when({ type: "SUBMITTED", providerTaskId: "up-1" });
    expect(appendOf(spec.effects())).toEqual({ type: "RecordAcceptance", providerTaskId: "up-1", channel: "local" });
  });

  it("given a copied result, when writing the success times out at NATS, then the log is reread and the same success written: no second copy, nothing held against the channel", () => {
    const spec = acceptedAndWaiting();
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    spec.when({ type: "STATUS", status: DONE_UPSTREAM }).when({ type: "COPIED", video: VIDEO });
    const success = appendOf(spec.effects());
    spec.when(failure(natsTimeout()));
    vi.advanceTimersByTime(30_000);
    expect(does(spec.effects())).toEqual(["readLog"]);
    spec.when(spec.logRead());
    expect(appendOf(spec.effects())).toEqual(success);
    spec.when(spec.appended(success));
    const all = does(spec.allEffects());
    expect(all.filter((effect) => effect === "copy")).toHaveLength(1);
    expect(all).not.toContain("noteTransient");
  });

  it("given a success write whose answer was lost but which landed, when the log is reread, then nothing is written twice and the task ends", () => {
    const spec = acceptedAndWaiting();
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    spec.when({ type: "STATUS", status: DONE_UPSTREAM }).when({ type: "COPIED", video: VIDEO });
    const success = appendOf(spec.effects());
    spec.appended(success); // it landed; the answer did not come back
    spec.when(failure(natsTimeout()));
    vi.advanceTimersByTime(30_000);
    spec.effects();
    spec.when(spec.logRead());
    // The decider finds nothing left to write: the machine's append is answered without a write.
    expect(appendOf(spec.effects())).toEqual(success);
    spec.when(spec.appended(success));
    expect(spec.log.filter((event) => event.type === "GenerationSucceeded")).toHaveLength(1);
    expect(does(spec.effects())).toEqual(["release", "forget"]);
  });

  it("given an accepted task, when writing the acceptance times out at NATS, then it is not submitted again nor held against the channel", () => {
    const spec = givenLiveTask().start();
    spec.when(slot()).when({ type: "SUBMITTED", providerTaskId: "up-1" });
    const acceptance = appendOf(spec.effects());
    spec.appended(acceptance); // landed, answer lost
    spec.when(failure(natsTimeout()));
    vi.advanceTimersByTime(30_000);
    spec.when(spec.logRead());
    spec.when(spec.appended(appendOf(spec.effects())));
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    const all = does(spec.allEffects());
    expect(all.filter((effect) => effect === "submit")).toHaveLength(1);
    expect(all).not.toContain("noteTransient");
    expect(spec.effects().at(-1)).toEqual({ do: "status", providerTaskId: "up-1" });
  });

  it("given a polled task, when the status call fails at our own NATS, then it asks again on schedule and nothing counts against the channel; a vendor's 503 does", () => {
    const spec = acceptedAndWaiting();
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    spec.effects();
    spec.when(failure(natsTimeout()));
    expect(spec.effects()).toEqual([]);
    vi.advanceTimersByTime(POLICY.pollEveryMs);
    expect(does(spec.effects())).toEqual(["status"]);
    spec.when(failure(new ProviderUnavailable("503 from the vendor")));
    expect(does(spec.effects())).toEqual(["warn", "noteTransient"]);
    expect(spec.log.map((event) => event.type)).toEqual(["TaskSubmitted", "UpstreamAccepted"]);
  });

  it("given a task waiting for a channel slot, when it ended elsewhere meanwhile, then the log is reread before any upstream call and the task leaves final", () => {
    const spec = givenLiveTask().start();
    spec.effects();
    spec.log.push({ type: "GenerationFailed", data: { reason: "cancelled", stage: "generation" }, meta: { schema: 1, taskId: 7, version: 2, at: new Date().toISOString() } });
    spec.when(slot(5_000));
    expect(spec.effects()).toEqual([{ do: "readLog" }]);
    spec.when(spec.logRead());
    expect(does(spec.effects())).toEqual(["release"]);
    expect(spec.exit()).toBe("final");
    expect(does(spec.allEffects())).not.toContain("submit");
  });

  it("given a redelivered accepted task, when its pinned slot came after a wait and another runner finished it, then it is not polled", () => {
    const accepted = { type: "UpstreamAccepted" as const, data: { providerTaskId: "up-1", channel: "local" }, meta: { schema: 1 as const, taskId: 7, version: 2, at: new Date().toISOString() } };
    const spec = givenLiveTask({ redelivered: true, events: [accepted] }).start();
    expect(spec.effects()).toEqual([{ do: "readLog" }]);
    spec.when(spec.logRead());
    expect(spec.effects()).toEqual([{ do: "acquire", on: "local" }]);
    spec.log.push({ type: "GenerationSucceeded", data: { video: VIDEO, durationSeconds: 4, resolution: "1280*720", totalTokens: 100 }, meta: { schema: 1, taskId: 7, version: 3, at: new Date().toISOString() } });
    spec.when(slot(2_000)).when(spec.logRead());
    expect(does(spec.allEffects())).not.toContain("status");
    expect(spec.state()).toBe("forgetting");
  });

  it("given a task the upstream lost (a local render whose process ended), when its log says it is still live, then it is started again; when final, it is not", () => {
    const live = acceptedAndWaiting();
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    live.effects();
    live.when(failure(new UpstreamLost("no render")));
    expect(live.effects()).toEqual([{ do: "readLog" }]);
    live.when(live.logRead());
    expect(live.effects()).toEqual([{ do: "restart", providerTaskId: "up-1" }]);

    const ended = acceptedAndWaiting();
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    ended.when(failure(new UpstreamLost("no render")));
    ended.log.push({ type: "GenerationSucceeded", data: { video: VIDEO, durationSeconds: 4, resolution: "1280*720", totalTokens: 100 }, meta: { schema: 1, taskId: 7, version: 3, at: new Date().toISOString() } });
    ended.effects();
    ended.when(ended.logRead());
    expect(does(ended.allEffects())).not.toContain("restart");
    expect(does(ended.effects())).toEqual(["release", "forget"]);
  });

  it("given a task waiting for its next poll, when its deadline passes first, then it times out without asking the upstream and cancels the upstream task", () => {
    const spec = givenLiveTask({ maxTaskMs: 500 }).start();
    spec.when(slot()).when({ type: "SUBMITTED", providerTaskId: "up-1" });
    spec.when(spec.appended(appendOf(spec.effects())));
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    const timeout = appendOf(spec.effects());
    expect(timeout.type).toBe("CheckDeadline");
    spec.when(spec.appended(timeout));
    expect(spec.effects()).toEqual([{ do: "release" }, { do: "cancel", providerTaskId: "up-1", channel: "local", submitCutShort: false }]);
    expect(does(spec.allEffects())).not.toContain("status");
    expect(spec.log.at(-1)?.type).toBe("GenerationFailed");
  });

  it("given a submit, when the upstream fails passingly, then the channel hears of it, the slot is given back and the next attempt looks for the earlier submit first", () => {
    const spec = givenLiveTask().start();
    spec.when(slot()).effects();
    spec.when(failure(new ProviderUnavailable("connect ECONNRESET")));
    expect(does(spec.effects())).toEqual(["noteTransient", "release"]);
    vi.advanceTimersByTime(30_000);
    expect(spec.effects()).toEqual([{ do: "acquire", avoid: "local" }]);
    spec.when(slot());
    expect(spec.effects()).toEqual([{ do: "find", channels: ["local"] }]);
  });

  it("given a redelivered task without an acceptance, when the upstream has it on another channel, then it moves there and records that acceptance without submitting", () => {
    const spec = givenLiveTask({ redelivered: true }).start();
    spec.when(spec.logRead());
    spec.effects();
    spec.when(slot());
    expect(spec.effects()).toEqual([{ do: "find" }]);
    spec.when({ type: "FOUND", channel: "other", providerTaskId: "up-9" });
    expect(spec.effects()).toEqual([{ do: "release" }, { do: "acquire", on: "other" }]);
    spec.when({ type: "SLOT", channel: "other", policy: POLICY, waitedMs: 0 });
    expect(appendOf(spec.effects())).toEqual({ type: "RecordAcceptance", providerTaskId: "up-9", channel: "other" });
    expect(does(spec.allEffects())).not.toContain("submit");
  });

  it("given a slot after a wait, when the log reads back without the task's first event, then nothing is submitted and the task is left", () => {
    const spec = givenLiveTask().start();
    spec.effects();
    spec.log.length = 0;
    spec.when(slot(5_000)).when(spec.logRead());
    expect(does(spec.allEffects())).not.toContain("submit");
    expect(spec.exit()).toBe("steppedAside");
  });

  it("keeps one small context shape through a task's life: xstate copies the whole context on every assign, and V8 keeps a copy of more than 19 keys in dictionary mode", () => {
    const spec = givenLiveTask().start();
    const keys = Object.keys(spec.actor.getSnapshot().context);
    expect(keys.length).toBeLessThanOrEqual(19);
    spec.when(slot()).when({ type: "SUBMITTED", providerTaskId: "up-1" });
    spec.when(spec.appended(appendOf(spec.effects())));
    vi.advanceTimersByTime(POLICY.pollFirstAfterMs);
    spec.when({ type: "STATUS", status: DONE_UPSTREAM }).when({ type: "COPIED", video: VIDEO });
    expect(Object.keys(spec.actor.getSnapshot().context)).toEqual(keys);
  });

  it("given any step, when another writer moved the log on (the append's fence), then the task steps aside", () => {
    const spec = givenLiveTask().start();
    spec.when(slot()).when({ type: "SUBMITTED", providerTaskId: "up-1" }).when({ type: "LOST_RACE" });
    expect(does(spec.effects()).slice(-2)).toEqual(["release", "readLog"]);
    spec.when(spec.logRead());
    expect(spec.exit()).toBe("steppedAside");
  });
});

describe("what a failed call means to the machine", () => {
  it("tells our own NATS apart from the vendor", () => {
    expect(callFailureOf(new TimeoutError()).kind).toBe("infrastructure");
    expect(callFailureOf(new Error("wrapped", { cause: new TimeoutError() })).kind).toBe("infrastructure");
    expect(callFailureOf(new ProviderUnavailable("429", 2_000, true))).toEqual({ kind: "unavailable", message: "429", retryAfterMs: 2_000, refused: true });
    expect(callFailureOf(new Error("socket hang up")).kind).toBe("passing");
  });
});
