import { describe, expect, it } from "vitest";
import type { NewTaskEvent, TaskEvent } from "../contracts/videoTask.ts";
import { statsOf, type StatsChange, type TaskFacts } from "../services/tasks/taskStats.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";

const at = "2030-01-01T10:15:00.000Z";
const log = (...events: NewTaskEvent[]): TaskEvent[] =>
  events.map((event, index) => ({ ...event, meta: { schema: 1, taskId: 7, version: index + 1, at } }) as TaskEvent);
const submitted: NewTaskEvent = { type: "TaskSubmitted", data: { account: "acme", job, ignoredFields: [], deadlineAt: at, clientReference: "reelay-task-7" } };
const started: NewTaskEvent = { type: "GenerationStarted", data: {} };
const succeeded: NewTaskEvent = { type: "GenerationSucceeded", data: { video: { object: "v.mp4", bytes: 1, contentType: "video/mp4" }, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 } };
const failed: NewTaskEvent = { type: "GenerationFailed", data: { reason: "x", stage: "generation" } };

/** Folds a log and sums every counter change by document and field. */
function totals(events: TaskEvent[]): Record<string, number> {
  let facts: TaskFacts | undefined;
  const sums: Record<string, number> = {};
  for (const event of events) {
    const result = statsOf(facts, event);
    facts = result.facts;
    for (const change of result.changes as StatsChange[]) {
      for (const [field, by] of Object.entries(change.delta)) sums[`${change.doc}.${field}`] = (sums[`${change.doc}.${field}`] ?? 0) + (by ?? 0);
    }
  }
  return Object.fromEntries(Object.entries(sums).filter(([, value]) => value !== 0));
}

describe("task stats fold", () => {
  it("a task that succeeds counts once as success, created and charged at its price", () => {
    expect(totals(log(submitted, started, succeeded))).toEqual({
      "status.success": 1,
      "hour.created": 1,
      "hour.succeeded": 1,
      "hour.tokens": 108_900,
      "hour.chargedMicros": 5_009_400,
      "day.created": 1,
      "day.succeeded": 1,
      "day.tokens": 108_900,
      "day.chargedMicros": 5_009_400,
    });
  });

  it("a task whose upstream was done at the first look succeeds straight from pending, counted the same", () => {
    expect(totals(log(submitted, succeeded))).toEqual(totals(log(submitted, started, succeeded)));
  });

  it("a task that fails before it ran leaves pending and counts as failed, free", () => {
    expect(totals(log(submitted, failed))).toEqual({ "status.failed": 1, "hour.created": 1, "hour.failed": 1, "day.created": 1, "day.failed": 1 });
  });

  it("events after the end, and a second submission, change nothing", () => {
    expect(totals(log(submitted, started, failed, succeeded, failed, submitted))).toEqual(totals(log(submitted, started, failed)));
  });
});
