import { describe, expect, it } from "vitest";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import type { ProviderReport } from "../machines/videoTask.ts";
import { decideTask, decideTaskSteps, evolveTask, firstTaskEvent, foldTask, initialTaskState, MAX_DETAIL_CHARS, MAX_REASON_CHARS, taskOf, type TaskCommand } from "../machines/videoTaskDecider.ts";
import { deciderSpecification } from "./helpers/deciderSpecification.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";

const deadlineAt = "2030-01-01T00:15:00.000Z";
const spec = deciderSpecification({ initialState: initialTaskState, evolve: evolveTask, decide: decideTask });

/** Events as they stand in a task's log: meta.version is the position. */
function log(...events: NewTaskEvent[]): TaskEvent[] {
  return events.map((event, index) => ({ ...event, meta: { schema: 1, taskId: 7, version: index + 1, at: "2030-01-01T00:00:00.000Z" } }) as TaskEvent);
}

const submitted: NewTaskEvent = { type: "TaskSubmitted", data: { account: "a", job, ignoredFields: [], deadlineAt, clientReference: "reelay-task-7" } };
const accepted: NewTaskEvent = { type: "UpstreamAccepted", data: { providerTaskId: "up-1" } };
const started: NewTaskEvent = { type: "GenerationStarted", data: {} };
const video = { object: "v.mp4", bytes: 10, contentType: "video/mp4" };
const succeeded: NewTaskEvent = { type: "GenerationSucceeded", data: { video, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 } };
const failed = (reason: string, stage: "submit" | "generation" | "timeout"): NewTaskEvent => ({ type: "GenerationFailed", data: { reason, stage } });
/** The event right after the acceptance, as decided: with the acceptance's copy for the reactors (they do not read it). */
const afterAcceptance = (event: NewTaskEvent): NewTaskEvent => ({ ...event, data: { ...event.data, accepted: { providerTaskId: "up-1" } } }) as NewTaskEvent;
const success: ProviderReport = { state: "succeeded", video, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 };

const submit: TaskCommand = { type: "SubmitTask", taskId: 7, account: "a", job, ignoredFields: [], deadlineAt, clientReference: "reelay-task-7" };
const accept = (providerTaskId: string): TaskCommand => ({ type: "RecordAcceptance", providerTaskId });
const reject: TaskCommand = { type: "RecordRejection", reason: "nsfw" };
const report = (r: ProviderReport): TaskCommand => ({ type: "RecordReport", report: r });
const clock = (now: string): TaskCommand => ({ type: "CheckDeadline", now: new Date(now), maxTaskMs: 900_000 });
const deleteVideo: TaskCommand = { type: "DeleteVideo", objects: ["v.mp4"] };
const deleted: NewTaskEvent = { type: "VideoDeleted", data: { objects: ["v.mp4"] } };

const UNSUBMITTED = log();
const PENDING = log(submitted);
const ACCEPTED = log(submitted, accepted);
const RUNNING = log(submitted, accepted, started);
const SUCCESS = log(submitted, accepted, started, succeeded);
const FAILED = log(submitted, accepted, failed("boom", "generation"));

describe("video task decider: every transition", () => {
  it("unsubmitted + SubmitTask → TaskSubmitted", () => spec.given(UNSUBMITTED).when(submit).then([submitted]));
  it("a create's first event is that TaskSubmitted", () => expect([firstTaskEvent({ taskId: 7, account: "a", job, ignoredFields: [], deadlineAt })]).toEqual(decideTask(submit, initialTaskState())));
  it("pending + RecordAcceptance → UpstreamAccepted", () => spec.given(PENDING).when(accept("up-1")).then([accepted]));
  it("pending + RecordRejection → GenerationFailed at submit", () => spec.given(PENDING).when(reject).then([failed("nsfw", "submit")]));
  it("accepted + report running → GenerationStarted, carrying the acceptance", () => spec.given(ACCEPTED).when(report({ state: "running" })).then([afterAcceptance(started)]));
  it("accepted + a first report of success → GenerationSucceeded alone (never seen running)", () => spec.given(ACCEPTED).when(report(success)).then([afterAcceptance(succeeded)]));
  it("accepted + report failed → GenerationFailed at generation", () =>
    spec.given(ACCEPTED).when(report({ state: "failed", reason: "nope" })).then([afterAcceptance(failed("nope", "generation"))]));
  it("accepted past its deadline → GenerationFailed at timeout, carrying the acceptance", () =>
    spec.given(ACCEPTED).when(clock("2030-01-01T00:15:00Z")).then([afterAcceptance(failed("timed out: not finished within 15 minutes", "timeout"))]));
  it("running + report succeeded → GenerationSucceeded", () => spec.given(RUNNING).when(report(success)).then([succeeded]));
  it("running + report failed → GenerationFailed", () => spec.given(RUNNING).when(report({ state: "failed", reason: "x" })).then([failed("x", "generation")]));
  it("running + a failure whose reason and detail are megabytes long (a client's own host name in a fetch error) → GenerationFailed with both cut", () =>
    spec
      .given(RUNNING)
      .when(report({ state: "failed", reason: "r".repeat(3_000_000), detail: "d".repeat(3_000_000) }))
      .then([{ type: "GenerationFailed", data: { reason: `${"r".repeat(MAX_REASON_CHARS - 1)}…`, stage: "generation", detail: `${"d".repeat(MAX_DETAIL_CHARS - 1)}…` } }]));
  it("pending + a rejection with a long reason → GenerationFailed at submit, its reason cut", () =>
    spec.given(PENDING).when({ type: "RecordRejection", reason: "n".repeat(5_000) }).then([failed(`${"n".repeat(MAX_REASON_CHARS - 1)}…`, "submit")]));
  it("pending past its deadline → GenerationFailed at timeout", () =>
    spec.given(PENDING).when(clock("2030-01-01T00:15:00Z")).then([failed("timed out: not finished within 15 minutes", "timeout")]));
  it("running past its deadline → GenerationFailed at timeout", () =>
    spec.given(RUNNING).when(clock("2030-01-01T00:20:00Z")).then([failed("timed out: not finished within 15 minutes", "timeout")]));
  it("running + a report with the upstream's progress → GenerationProgressed", () =>
    spec.given(RUNNING).when(report({ state: "running", progress: 30 })).then([{ type: "GenerationProgressed", data: { progress: 30 } }]));
  it("accepted + a first report with progress → started, then progressed", () =>
    spec.given(ACCEPTED).when(report({ state: "running", progress: 20 })).then([afterAcceptance(started), { type: "GenerationProgressed", data: { progress: 20 } }]));
  it("progress of 100 is recorded even within a step of the last", () =>
    spec.given(log(submitted, accepted, started, { type: "GenerationProgressed", data: { progress: 95 } })).when(report({ state: "running", progress: 100 })).then([{ type: "GenerationProgressed", data: { progress: 100 } }]));
  it("success + DeleteVideo → VideoDeleted", () => spec.given(SUCCESS).when(deleteVideo).then([deleted]));
  it("failed + DeleteVideo → VideoDeleted", () => spec.given(FAILED).when(deleteVideo).then([deleted]));
});

describe("video task decider: every refused command", () => {
  it("a second submission", () => spec.given(PENDING).when(submit).thenNothing());
  it("anything but a submission before the task exists", () => {
    for (const command of [accept("up-1"), reject, report(success), report({ state: "running" }), clock("2031-01-01T00:00:00Z")]) {
      spec.given(UNSUBMITTED).when(command).thenNothing();
    }
  });
  it("a second acceptance (the first upstream id stays)", () => spec.given(ACCEPTED).when(accept("up-2")).thenNothing());
  it("running before the upstream accepted", () => spec.given(PENDING).when(report({ state: "running" })).thenNothing());
  it("success before the upstream accepted", () => spec.given(PENDING).when(report(success)).thenNothing());
  it("a queued report", () => spec.given(ACCEPTED).when(report({ state: "queued" })).thenNothing());
  it("running again", () => spec.given(RUNNING).when(report({ state: "running" })).thenNothing());
  it("a clock before the deadline", () => spec.given(RUNNING).when(clock("2030-01-01T00:14:59Z")).thenNothing());
  it("progress that grew less than a step, or went back", () => {
    const at30 = log(submitted, accepted, started, { type: "GenerationProgressed", data: { progress: 30 } });
    for (const progress of [30, 35, 39, 10]) spec.given(at30).when(report({ state: "running", progress })).thenNothing();
  });
  it("deleting a task's video before it ended, or a second time", () => {
    for (const notEnded of [UNSUBMITTED, PENDING, ACCEPTED, RUNNING]) spec.given(notEnded).when(deleteVideo).thenNothing();
    spec.given(log(submitted, accepted, started, succeeded, deleted)).when(deleteVideo).thenNothing();
  });
  it("anything after success or failure", () => {
    for (const final of [SUCCESS, FAILED, log(submitted, accepted, started, succeeded, deleted)]) {
      for (const command of [submit, accept("up-9"), reject, report(success), report({ state: "failed", reason: "late" }), clock("2031-01-01T00:00:00Z")]) {
        spec.given(final).when(command).thenNothing();
      }
    }
  });
});

describe("video task state", () => {
  it("a final task always has its outcome, a running one its upstream id", () => {
    expect(taskOf(foldTask(SUCCESS))).toMatchObject({ status: "success", providerTaskId: "up-1", outcome: { kind: "succeeded", totalTokens: 108_900 } });
    expect(taskOf(foldTask(FAILED))).toMatchObject({ status: "failed", outcome: { kind: "failed", reason: "boom" } });
    expect(taskOf(foldTask(RUNNING))).toMatchObject({ status: "running", providerTaskId: "up-1" });
    expect(taskOf(foldTask(UNSUBMITTED))).toEqual({ status: "unsubmitted" });
  });

  it("the version is the position in the log, counting an event the machine refused", () => {
    // A log can hold a refused event (two runners raced, or an old bug): it still took a place.
    const withRefused = log(submitted, started, accepted);
    const state = foldTask(withRefused);
    expect(state.version).toBe(3);
    expect(taskOf(state)).toMatchObject({ status: "pending", providerTaskId: "up-1" });
    expect(decideTask(report({ state: "running" }), state)).toEqual([afterAcceptance(started)]);
  });

  it("the state each decided event leads to is what evolving the appended event gives (an appender keeps it)", () => {
    const commands = [submit, accept("up-2"), reject, report({ state: "running", progress: 50 }), report(success), report({ state: "failed", reason: "x" }), clock("2030-01-01T00:20:00Z"), deleteVideo];
    for (const given of [UNSUBMITTED, PENDING, ACCEPTED, RUNNING, SUCCESS, FAILED]) {
      for (const command of commands) {
        let state = foldTask(given);
        for (const { event, after } of decideTaskSteps(command, state)) {
          // The appender's meta (its time, its position) is not the decider's: the machine never reads it.
          const appended = { ...event, meta: { schema: 1, taskId: 7, version: state.version + 1, at: "2030-01-01T00:21:00.000Z" } } as TaskEvent;
          state = evolveTask(state, appended);
          expect(after.version).toBe(state.version);
          expect(taskOf(after)).toEqual(taskOf(state));
          expect(after.snapshot.value).toEqual(state.snapshot.value);
          expect(after.snapshot.context).toEqual(state.snapshot.context);
        }
      }
    }
  });
});
