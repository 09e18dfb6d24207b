import { describe, expect, it } from "vitest";
import type { LedgerEvent } from "../contracts/ledger.ts";
import type { TaskEvent } from "../contracts/videoTask.ts";
import { ChargeAudit } from "../services/billing/chargeAudit.ts";
import { sampleJob } from "./helpers/fixtures.ts";

const at = "2031-01-01T00:00:00.000Z";
const task = (taskId: number, version: number, rest: Omit<TaskEvent, "meta">): TaskEvent => ({ ...rest, meta: { schema: 1, taskId, version, at } }) as TaskEvent;
const opened = (taskId: number) => task(taskId, 1, { type: "TaskSubmitted", data: { account: "acme", job: sampleJob, ignoredFields: [], deadlineAt: at } });
const succeeded = (taskId: number, totalTokens = 108_900) =>
  task(taskId, 2, { type: "GenerationSucceeded", data: { video: { object: "v", bytes: 1, contentType: "video/mp4" }, durationSeconds: 5, resolution: "1280*720", totalTokens } });
const failed = (taskId: number) => task(taskId, 2, { type: "GenerationFailed", data: { reason: "no", stage: "generation" } });
const meta = { schema: 1 as const, account: "acme", version: 1, at, cause: "c" };
const settled = (taskId: number, costMicros: number): LedgerEvent => ({ type: "ReservationSettled", data: { taskId, reservedMicros: 1, costMicros, totalTokens: 108_900, model: "m" }, meta });
const released = (taskId: number): LedgerEvent => ({ type: "ReservationReleased", data: { taskId, reservedMicros: 1, reason: "r" }, meta });
// sampleJob: 46 yuan per million tokens; 108,900 tokens cost 5.009400 yuan.
const PRICE_OF_SUCCESS = 5_009_400;

/**
 * given these task and money events in log order (the first at sequence 1), audited through `endedThrough`,
 * then these problems.
 */
function audit(steps: Array<TaskEvent | LedgerEvent>, endedThrough?: number) {
  const charges = new ChargeAudit(endedThrough);
  steps.forEach((step, index) => {
    if ("taskId" in step.meta) charges.addTaskEvent("acme", step as TaskEvent, index + 1);
    else charges.addLedgerEvent(step as LedgerEvent);
  });
  return charges.result();
}

describe("reelay audit charges: every success charged exactly once, every failure free", () => {
  it("given a success settled at its price and a failure released, then no problem", () => {
    expect(audit([opened(1), opened(2), succeeded(1), failed(2), settled(1, PRICE_OF_SUCCESS), released(2)])).toEqual({ finalTasks: 2, problems: [], settling: 0 });
  });

  it("given a task still running with its reservation open, then it is not checked", () => {
    expect(audit([opened(1)])).toEqual({ finalTasks: 0, problems: [], settling: 0 });
  });

  it("given a success never settled (a task that ran free), then it is named", () => {
    expect(audit([opened(1), succeeded(1)]).problems).toEqual([{ taskId: 1, account: "acme", problem: "succeeded but its reservation was never closed" }]);
  });

  it("given a success charged twice, a failure charged, a success released, a wrong price: each is named", () => {
    const { problems } = audit([
      ...[1, 2, 3, 4].map(opened),
      succeeded(1),
      settled(1, PRICE_OF_SUCCESS),
      settled(1, PRICE_OF_SUCCESS),
      failed(2),
      settled(2, 7),
      succeeded(3),
      released(3),
      succeeded(4),
      settled(4, PRICE_OF_SUCCESS + 1),
    ]);
    expect(problems.map((p) => [p.taskId, p.problem])).toEqual([
      [1, "its reservation was closed 2 times"],
      [2, "failed but was charged"],
      [3, "succeeded but was not charged"],
      [4, `charged ${PRICE_OF_SUCCESS + 1} µ¥ for 108900 tokens, which cost ${PRICE_OF_SUCCESS} µ¥`],
    ]);
  });

  it("given tasks that ended past the audit's point (a live system), then they are settling, not problems, settled yet or not", () => {
    // Sequences: 1-3 opened, 4 success of 1, 5 success of 2, 6 its settlement, 7 failure of 3; audited through 4.
    expect(audit([opened(1), opened(2), opened(3), succeeded(1), succeeded(2), settled(2, PRICE_OF_SUCCESS), failed(3)], 4)).toEqual({
      finalTasks: 1,
      problems: [{ taskId: 1, account: "acme", problem: "succeeded but its reservation was never closed" }],
      settling: 2,
    });
  });

  it("given a closing of a task the log never opened, or of one still running, then it is named", () => {
    const { problems } = audit([settled(9, 1), opened(1), released(1)]);
    expect(problems.map((p) => [p.taskId, p.problem])).toEqual([
      [9, "ReservationSettled of a task that has no opening"],
      [1, "its reservation was released before it ended"],
    ]);
  });

  it("given two openings with one Idempotency-Key within its lifetime (a client that paid twice for one request), then the second is named; past 24 h, or on another account, a key is new", () => {
    const keyed = (taskId: number, account: string, when: string): [string, TaskEvent] => [
      account,
      { type: "TaskSubmitted", data: { account, job: sampleJob, ignoredFields: [], deadlineAt: at, idempotency: { keyHash: "k1", fingerprint: "f" } }, meta: { schema: 1, taskId, version: 1, at: when } },
    ];
    const charges = new ChargeAudit();
    const openings = [
      keyed(1, "acme", "2031-01-01T00:00:00.000Z"),
      keyed(2, "acme", "2031-01-01T23:00:00.000Z"),
      keyed(3, "acme", "2031-01-02T01:00:00.000Z"),
      keyed(4, "bolt", "2031-01-01T00:00:01.000Z"),
    ];
    for (const [account, event] of openings) charges.addTaskEvent(account, event);
    expect(charges.result().problems).toEqual([{ taskId: 2, account: "acme", problem: "a second task for the Idempotency-Key of task 1" }]);
  });
});
