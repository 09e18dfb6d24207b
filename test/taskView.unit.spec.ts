import { describe, expect, it } from "vitest";
import { estimatedProgress } from "../services/edge/openaiVideos/videoObject.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import { EventOutOfOrder } from "../services/shared/projection.ts";
import { evolveTaskView, evolveTaskViewForReactors } from "../services/tasks/taskView.ts";

const at = (n: number) => `2030-01-01T00:00:0${n}.000Z`;
function events(...list: NewTaskEvent[]): TaskEvent[] {
  return list.map((event, index) => ({ ...event, meta: { schema: 1, taskId: 3, version: index + 1, at: at(index) } }) as TaskEvent);
}
const lifecycle = events(
  { type: "TaskSubmitted", data: { account: "acme", job, ignoredFields: [], deadlineAt: at(9) } },
  { type: "UpstreamAccepted", data: { providerTaskId: "local-3-x" } },
  { type: "GenerationStarted", data: {} },
  {
    type: "GenerationSucceeded",
    data: { video: { object: "local-3-x.mp4", bytes: 5, contentType: "video/mp4" }, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 },
  },
);

describe("task view projection", () => {
  it("given a whole lifecycle, then the view is the success answer of the query endpoint", () => {
    const view = lifecycle.reduce(evolveTaskView, null);
    expect(view).toEqual({
      taskId: 3,
      account: "acme",
      model: "VideoModel-2.0",
      status: "success",
      providerTaskId: "local-3-x",
      video: { object: "local-3-x.mp4", bytes: 5, contentType: "video/mp4" },
      durationSeconds: 5,
      resolution: "1280*720",
      totalTokens: 108_900,
      pricePerMillionTokens: 46,
      costMicros: 5_009_400,
      prompt: "p",
      requestedSeconds: 5,
      width: 1280,
      height: 720,
      finishedAt: at(3),
      createdAt: at(0),
      updatedAt: at(3),
      version: 4,
    });
  });

  it("when an event is delivered twice, then the second delivery changes nothing", () => {
    const once = lifecycle.slice(0, 3).reduce(evolveTaskView, null);
    expect(evolveTaskView(once, lifecycle[1] as TaskEvent)).toBe(once);
  });

  it("when an event skips ahead, then it is refused for a later retry", () => {
    const first = evolveTaskView(null, lifecycle[0] as TaskEvent);
    expect(() => evolveTaskView(first, lifecycle[2] as TaskEvent)).toThrow(EventOutOfOrder);
  });

  it("when a task fails, then the view carries the reason", () => {
    const failed = events(
      { type: "TaskSubmitted", data: { account: "acme", job, ignoredFields: [], deadlineAt: at(9) } },
      { type: "GenerationFailed", data: { reason: "timed out", stage: "timeout" } },
    ).reduce(evolveTaskView, null);
    expect(failed).toMatchObject({ status: "failed", failureReason: "timed out" });
  });
});

describe("task view as the reactors fold it (without the upstream's acceptance)", () => {
  const [opening, , started, succeeded] = lifecycle as [TaskEvent, TaskEvent, TaskEvent, TaskEvent];
  const startedWithCopy = { ...started, data: { accepted: { providerTaskId: "local-3-x" } } } as TaskEvent;

  it("given the opening, the start carrying the acceptance and the success, then the view is the one the whole log gives", () => {
    const view = [opening, startedWithCopy, succeeded].reduce(evolveTaskViewForReactors, null);
    expect(view).toEqual(lifecycle.reduce(evolveTaskView, null));
  });

  it("when an event after a gap does not follow an acceptance, then it is refused for a later retry", () => {
    const first = evolveTaskViewForReactors(null, opening);
    expect(() => evolveTaskViewForReactors(first, started)).toThrow(EventOutOfOrder);
    expect(() => evolveTaskViewForReactors(evolveTaskViewForReactors(first, startedWithCopy), { ...succeeded, meta: { ...succeeded.meta, version: 5 } } as TaskEvent)).toThrow(EventOutOfOrder);
  });

  it("when the whole log is folded, then the acceptance's copy changes nothing", () => {
    const withCopy = [opening, lifecycle[1] as TaskEvent, startedWithCopy, succeeded].reduce(evolveTaskView, null);
    expect(withCopy).toEqual(lifecycle.reduce(evolveTaskView, null));
  });
});

describe("the OpenAI video object's progress", () => {
  const base = { status: "running" as const, createdAt: "2030-01-01T00:00:00.000Z" };
  const at = (seconds: number) => Date.parse("2030-01-01T00:00:00.000Z") + seconds * 1000;

  it("is the upstream's where it reports one, and never goes down when its first report is below the estimate shown before", () => {
    const shownBefore = estimatedProgress(base, at(60));
    const reportedLow = estimatedProgress({ ...base, progress: 10, progressSince: new Date(at(60)).toISOString() }, at(61));
    expect(reportedLow).toBe(shownBefore);
    expect(estimatedProgress({ ...base, progress: 90, progressSince: new Date(at(60)).toISOString() }, at(62))).toBe(90);
  });

  it("never goes down over time without reports, and stays below 100 until the task ends", () => {
    let last = 0;
    for (let seconds = 0; seconds < 3600; seconds += 7) {
      const shown = estimatedProgress(base, at(seconds));
      expect(shown).toBeGreaterThanOrEqual(last);
      expect(shown).toBeLessThan(100);
      last = shown;
    }
    expect(estimatedProgress({ ...base, status: "success" }, at(1))).toBe(100);
    expect(estimatedProgress({ ...base, status: "pending" }, at(100))).toBe(0);
  });
});
