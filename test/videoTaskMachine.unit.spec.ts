import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { transition } from "xstate";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import { applyTaskEvent, INITIAL_SNAPSHOT, isFinalStatus, statusAfter, statusMovedTo, videoTaskMachine, type PublicTaskStatus, type VideoTaskSnapshot } from "../machines/videoTask.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";

const video = { object: "v.mp4", bytes: 10, contentType: "video/mp4" };
const EVENTS: NewTaskEvent[] = [
  { type: "TaskSubmitted", data: { account: "a", job, ignoredFields: [], deadlineAt: "2030-01-01T00:15:00.000Z", clientReference: "reelay-task-7" } },
  { type: "UpstreamAccepted", data: { providerTaskId: "up-1" } },
  { type: "UpstreamAccepted", data: { providerTaskId: "up-2", channel: "second" } },
  { type: "GenerationStarted", data: {} },
  { type: "GenerationProgressed", data: { progress: 10 } },
  { type: "GenerationProgressed", data: { progress: 55 } },
  { type: "GenerationProgressed", data: { progress: 100 } },
  { type: "GenerationSucceeded", data: { video, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 } },
  { type: "GenerationFailed", data: { reason: "boom", stage: "generation" } },
  { type: "VideoDeleted", data: { objects: ["v.mp4"] } },
];

const placed = (event: NewTaskEvent, version: number): TaskEvent => ({ ...event, meta: { schema: 1, taskId: 7, version, at: "2030-01-01T00:00:00.000Z" } }) as TaskEvent;
/** What xstate's own `transition()` makes of the event (a fresh actor scope per call). */
const byXstate = (snapshot: VideoTaskSnapshot, event: TaskEvent): VideoTaskSnapshot => (snapshot.can(event) ? transition(videoTaskMachine, snapshot, event)[0] : snapshot);

describe("video task machine", () => {
  it("applies events exactly as xstate's transition() does, in any order, legal or not", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: EVENTS.length - 1 }), { maxLength: 12 }), (picks) => {
        let ours = INITIAL_SNAPSHOT;
        let theirs = INITIAL_SNAPSHOT;
        picks.forEach((pick, index) => {
          const event = placed(EVENTS[pick] as NewTaskEvent, index + 1);
          ours = applyTaskEvent(ours, event);
          theirs = byXstate(theirs, event);
          expect({ value: ours.value, context: ours.context, status: ours.status }).toEqual({ value: theirs.value, context: theirs.context, status: theirs.status });
        });
      }),
      { numRuns: 500 },
    );
  });
});

describe("the public status read models take from the task machine", () => {
  it("moves as the machine's table says, whatever the read model", () => {
    expect(statusAfter(undefined, "TaskSubmitted")).toBe("pending");
    expect(statusAfter(undefined, "GenerationStarted")).toBeUndefined();
    expect(statusAfter("pending", "UpstreamAccepted")).toBe("pending");
    expect(statusAfter("pending", "GenerationStarted")).toBe("running");
    expect(statusAfter("pending", "GenerationSucceeded")).toBe("success");
    expect(statusAfter("running", "GenerationFailed")).toBe("failed");
    // Ended: nothing moves it again.
    expect(statusAfter("success", "GenerationFailed")).toBe("success");
    expect(statusAfter("failed", "VideoDeleted")).toBe("failed");
    expect(statusMovedTo("GenerationProgressed")).toBeUndefined();
    expect(statusMovedTo("GenerationSucceeded")).toBe("success");
    expect(["pending", "running", "success", "failed"].filter((status) => isFinalStatus(status as PublicTaskStatus))).toEqual(["success", "failed"]);
  });
});
