import type { JetStreamManager } from "@nats-io/jetstream";
import { TimeoutError } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import type { TaskOpening } from "../contracts/taskOpening.ts";
import type { TaskSubmittedEvent } from "../contracts/videoTask.ts";
import { InsufficientBalanceError } from "../services/billing/account.ts";
import type { OpenOutcome } from "../services/billing/accountLedger.ts";
import { createVideoTask, type CreateDeps } from "../services/edge/video/createTask.ts";
import { normalizeVideoRequest } from "../services/edge/video/normalizeRequest.ts";
import { AccountBusyError, ServiceUnavailableError } from "../services/shared/errors.ts";
import { loadConfig } from "../services/shared/config.ts";
import type { IdempotencyIndex } from "../services/tasks/idempotencyIndex.ts";
import { silentLog } from "./helpers/testApp.ts";

const request = normalizeVideoRequest({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 }, loadConfig());

/** One try of the opening's write: what the ledger answers (or throws) for it. */
type Try = (opening: TaskSubmittedEvent, msgID: string) => OpenOutcome | Error;

/** A create's dependencies with the write scripted try by try, and a stream that holds what was written. */
function world(tries: Try[]) {
  const written = new Map<number, TaskOpening>();
  const calls: Array<{ taskId: number; msgID: string }> = [];
  let nextId = 100;
  const deps: CreateDeps = {
    taskIds: { take: async () => nextId++ },
    ledger: {
      open: async (opening, _amount, msgID) => {
        calls.push({ taskId: opening.meta.taskId, msgID });
        const outcome = (tries.shift() ?? (() => ({ written: true })))(opening, msgID);
        if (outcome instanceof Error) throw outcome;
        return outcome;
      },
    },
    jsm: { direct: { getMessage: async (_stream: string, { seq }: { seq: number }) => ({ json: () => written.get(seq) }) } } as unknown as JetStreamManager,
    keys: { find: async () => undefined } as unknown as IdempotencyIndex,
    submissions: { submissionOutcome: async (_taskId, _waitMs, done) => (await done, { outcome: "accepted", providerTaskId: "up-1" }) },
    views: { get: async () => undefined, creating: () => undefined, created: () => undefined, notCreated: () => undefined },
    connection: { connected: () => true },
    waitMs: 100,
    maxTaskMs: 60_000,
    writeMs: 1_000,
    log: silentLog,
  };
  return { deps, calls, written };
}

const timedOut = () => new Error("publish got no answer", { cause: new TimeoutError() });

describe("a create's one write when NATS does not answer", () => {
  it("given a first try that got no answer, when the second try finds it written (its msgID), then the create answers that task, written once", async () => {
    const { deps, calls } = world([() => timedOut(), () => ({ written: false })]);
    const created = await createVideoTask(deps, "acme", request, undefined);
    expect(created).toMatchObject({ taskId: 100, status: "pending", providerTaskId: "up-1" });
    // The same task and the same msgID each time: a first try that landed is found, never written again.
    expect(calls).toEqual([
      { taskId: 100, msgID: "open-100" },
      { taskId: 100, msgID: "open-100" },
    ]);
  });

  it("given no answer at all until the write budget is spent, then 503 saying the task may exist, and nothing is released", async () => {
    const { deps, calls } = world(Array.from({ length: 100 }, () => () => timedOut()));
    deps.writeMs = 250;
    await expect(createVideoTask(deps, "acme", request, undefined)).rejects.toThrow(ServiceUnavailableError);
    await expect(createVideoTask(deps, "acme", request, undefined)).rejects.toThrow(/may start all the same.*retry with the same Idempotency-Key/);
    expect(calls.every((call) => call.msgID === `open-${call.taskId}`)).toBe(true);
  });

  it("given a write that lost its account's races for the ledger's whole time, then 503 at once saying to try again, not that the task may exist", async () => {
    const { deps, calls } = world([() => new AccountBusyError()]);
    const refused = await createVideoTask(deps, "acme", request, undefined).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AccountBusyError);
    expect((refused as Error).message).toMatch(/busy with other writes: try again shortly/);
    // Surely not written: not tried again for the write budget as an unanswered write is.
    expect(calls).toHaveLength(1);
  });

  it("given a retry with an Idempotency-Key whose first attempt landed, then it answers the first attempt's task (the duplicate names where it is)", async () => {
    const { deps, written } = world([
      (opening) => {
        const meta = { schema: 1 as const, account: "acme", version: 2, at: opening.meta.at, cause: `reserve-task-${opening.meta.taskId}` };
        written.set(7, { task: opening, money: { type: "CostReserved", data: { taskId: opening.meta.taskId, amountMicros: 1 }, meta } });
        return new Error("connection lost", { cause: new TimeoutError() });
      },
    ]);
    deps.writeMs = 0;
    await expect(createVideoTask(deps, "acme", request, "order-1")).rejects.toThrow(ServiceUnavailableError);
    // The client retries: a new task id, the same key: the stream says the key's opening is at sequence 7.
    deps.ledger = { open: async () => ({ written: false, duplicateOf: 7 }) };
    const again = await createVideoTask(deps, "acme", request, "order-1");
    expect(again.taskId).toBe(100);
  });

  it("given a keyed retry the balance refuses, when no create with its key wrote anything, then the refusal stands", async () => {
    const { deps } = world([() => new InsufficientBalanceError("insufficient balance")]);
    deps.jsm = { direct: { getBatch: async () => (async function* () {})() } } as unknown as JetStreamManager;
    await expect(createVideoTask(deps, "acme", request, "order-2")).rejects.toThrow(InsufficientBalanceError);
  });
});
