import { moneyEpochAfter } from "../../contracts/ledger.ts";
import type { TaskOpening } from "../../contracts/taskOpening.ts";
import { taskEventsSubject, taskOpeningSubject, type TaskEvent } from "../../contracts/videoTask.ts";
import { sampleJob } from "../../test/helpers/fixtures.ts";

const video = { object: "bench.mp4", bytes: 1, contentType: "video/mp4" };

/**
 * A finished task as the log holds it, for suites that seed a store in bulk: its opening (the first event and
 * a reservation of nothing, at `accountVersion` of its account's money) and its success.
 */
export function finishedTaskMessages(taskId: number, account: string, accountVersion: number, at: string): Array<{ subject: string; body: string; event: TaskEvent }> {
  const submitted: TaskOpening["task"] = {
    type: "TaskSubmitted",
    data: { account, job: sampleJob, ignoredFields: [], deadlineAt: at, clientReference: `reelay-task-${taskId}` },
    meta: { schema: 1, taskId, version: 1, at },
  };
  const opening: TaskOpening = {
    task: submitted,
    money: { type: "CostReserved", data: { taskId, amountMicros: 0 }, meta: { schema: 1, account, version: accountVersion, at, cause: `reserve-task-${taskId}` } },
  };
  const succeeded: TaskEvent = {
    type: "GenerationSucceeded",
    data: { video, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 },
    meta: { schema: 1, taskId, version: 2, at },
  };
  return [
    // The seeds' money is their openings alone: the opening at `accountVersion` is in the epoch its predecessors fill.
    { subject: taskOpeningSubject(account, taskId, moneyEpochAfter(accountVersion - 1)), body: JSON.stringify(opening), event: submitted },
    { subject: taskEventsSubject(account, taskId, "state"), body: JSON.stringify(succeeded), event: succeeded },
  ];
}
