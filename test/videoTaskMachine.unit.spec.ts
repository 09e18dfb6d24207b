import { describe, expect, it } from "vitest";
import { sampleJob as job } from "./helpers/fixtures.ts";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import {
  applyTaskEvent,
  decideTaskEvents,
  foldTaskEvents,
  isFinal,
  taskState,
  type ProviderReport,
} from "../machines/videoTask.ts";

const deadlineAt = "2030-01-01T00:15:00.000Z";

function history(...events: NewTaskEvent[]): TaskEvent[] {
  return events.map((event, index) => ({ ...event, meta: { schema: 1, taskId: 7, version: index + 1, at: "2030-01-01T00:00:00.000Z" } }) as TaskEvent);
}
const submitted: NewTaskEvent = { type: "TaskSubmitted", data: { account: "a", job, ignoredFields: [], deadlineAt } };
const accepted: NewTaskEvent = { type: "UpstreamAccepted", data: { providerTaskId: "up-1" } };
const started: NewTaskEvent = { type: "GenerationStarted", data: {} };
const success: ProviderReport = {
  state: "succeeded",
  video: { object: "v.mp4", bytes: 10, contentType: "video/mp4" },
  durationSeconds: 5,
  resolution: "1280*720",
  totalTokens: 108_900,
};

describe("video task machine", () => {
  it("given no events, the task is unsubmitted and nothing is decided", () => {
    const snapshot = foldTaskEvents([]);
    expect(taskState(snapshot)).toBe("unsubmitted");
    expect(decideTaskEvents(snapshot, { kind: "upstreamReported", report: success })).toEqual([]);
  });

  it("given a submission, the task is pending and remembers its deadline", () => {
    const snapshot = foldTaskEvents(history(submitted));
    expect(taskState(snapshot)).toBe("pending");
    expect(snapshot.context).toMatchObject({ taskId: 7, version: 1, deadlineAt });
  });

  it("when the upstream accepts, then UpstreamAccepted — once only", () => {
    const pending = foldTaskEvents(history(submitted));
    expect(decideTaskEvents(pending, { kind: "upstreamAccepted", providerTaskId: "up-1" })).toEqual([accepted]);
    const acceptedSnapshot = foldTaskEvents(history(submitted, accepted));
    expect(decideTaskEvents(acceptedSnapshot, { kind: "upstreamAccepted", providerTaskId: "up-2" })).toEqual([]);
  });

  it("when the upstream refuses the submission, then the task fails at stage submit", () => {
    const pending = foldTaskEvents(history(submitted));
    expect(decideTaskEvents(pending, { kind: "upstreamRejected", reason: "nsfw" })).toEqual([
      { type: "GenerationFailed", data: { reason: "nsfw", stage: "submit" } },
    ]);
  });

  it("when a pending task is reported running, then GenerationStarted; when queued, nothing", () => {
    const pending = foldTaskEvents(history(submitted, accepted));
    expect(decideTaskEvents(pending, { kind: "upstreamReported", report: { state: "running" } })).toEqual([started]);
    expect(decideTaskEvents(pending, { kind: "upstreamReported", report: { state: "queued" } })).toEqual([]);
    const running = foldTaskEvents(history(submitted, accepted, started));
    expect(decideTaskEvents(running, { kind: "upstreamReported", report: { state: "running" } })).toEqual([]);
  });

  it("when a pending task is reported finished, then it starts and succeeds in order", () => {
    const pending = foldTaskEvents(history(submitted, accepted));
    const events = decideTaskEvents(pending, { kind: "upstreamReported", report: success });
    expect(events.map((e) => e.type)).toEqual(["GenerationStarted", "GenerationSucceeded"]);
    const final = foldTaskEvents(history(submitted, accepted, ...events));
    expect(taskState(final)).toBe("success");
    expect(isFinal(final)).toBe(true);
    expect(final.context.outcome).toEqual({ kind: "succeeded", totalTokens: 108_900 });
  });

  it("when the deadline passes, then the task fails with a timeout reason; before it, nothing", () => {
    const running = foldTaskEvents(history(submitted, accepted, started));
    expect(decideTaskEvents(running, { kind: "clock", now: new Date("2030-01-01T00:14:59Z"), maxTaskMs: 900_000 })).toEqual([]);
    expect(decideTaskEvents(running, { kind: "clock", now: new Date("2030-01-01T00:15:00Z"), maxTaskMs: 900_000 })).toEqual([
      { type: "GenerationFailed", data: { reason: "timed out: not finished within 15 minutes", stage: "timeout" } },
    ]);
  });

  it("given a final task, nothing more is decided and late events change nothing", () => {
    const failed = foldTaskEvents(history(submitted, accepted, { type: "GenerationFailed", data: { reason: "x", stage: "generation" } }));
    expect(taskState(failed)).toBe("failed");
    expect(failed.context.outcome).toEqual({ kind: "failed", reason: "x" });
    expect(decideTaskEvents(failed, { kind: "upstreamReported", report: success })).toEqual([]);
    expect(decideTaskEvents(failed, { kind: "clock", now: new Date("2031-01-01"), maxTaskMs: 900_000 })).toEqual([]);
    const late = history(submitted, accepted, started)[2] as TaskEvent;
    expect(applyTaskEvent(failed, late)).toEqual(failed);
  });

  it("refuses GenerationStarted before the upstream accepted the task", () => {
    const pending = foldTaskEvents(history(submitted));
    expect(taskState(applyTaskEvent(pending, history(submitted, started)[1] as TaskEvent))).toBe("pending");
  });
});
