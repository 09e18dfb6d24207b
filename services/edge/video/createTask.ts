import { setTimeout as sleep } from "node:timers/promises";
import type { JetStreamManager } from "@nats-io/jetstream";
import { TaskOpening } from "../../../contracts/taskOpening.ts";
import type { TaskSubmittedEvent } from "../../../contracts/videoTask.ts";
import { openingTaskEvent } from "../../../machines/videoTaskDecider.ts";
import { STREAMS } from "../../../infra/jetstreamLayout.ts";
import type { AccountLedger } from "../../billing/accountLedger.ts";
import { InsufficientBalanceError } from "../../billing/account.ts";
import { costMicros } from "../../billing/pricing.ts";
import { AccountBusyError, NATS_DOWN, ServiceUnavailableError, UnprocessableError, UpstreamRejectedError } from "../../shared/errors.ts";
import { failpoint } from "../../shared/failpoints.ts";
import { asServiceUnavailable } from "../../shared/infrastructureErrors.ts";
import type { Logger } from "../../shared/log.ts";
import { tasksCreated } from "../../shared/metrics/metrics.ts";
import type { SubmissionOutcome } from "../events/taskEventHub.ts";
import type { KeyedTask } from "../../tasks/idempotencyIndex.ts";
import { keyedOpeningMsgId, keyHashOf, requestFingerprint } from "./idempotencyKeys.ts";
import { recentKeyedOpening } from "./keyedOpenings.ts";
import type { KeyedTasks } from "./keyedTasks.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";
import type { TaskViewReader } from "./taskViewReader.ts";

export interface CreateDeps {
  /** Where task ids come from (a block at a time: taskIds.ts). */
  taskIds: { take(): Promise<number> };
  ledger: Pick<AccountLedger, "open">;
  jsm: JetStreamManager;
  /** The task an Idempotency-Key already made (the key index, or the log where the index lags). */
  keys: Pick<KeyedTasks, "find">;
  /** The edge's feed of the task log, where the upstream's answer to the submit shows up. */
  submissions: { submissionOutcome(taskId: number, waitMs: number, written: Promise<unknown>): Promise<SubmissionOutcome | undefined> };
  /** The edge's views: a task made here enters them from its opening, an earlier create's task is read there. */
  views: Pick<TaskViewReader, "get" | "creating" | "created" | "notCreated">;
  /** Whether the NATS connection is up: while it is down, creates answer 503 at once instead of timing out. */
  connection: { connected(): boolean };
  /** How long a create waits for the upstream to accept (the answer carries its task id). */
  waitMs: number;
  /** A task not final this long after its create fails (its deadline, on the opening). */
  maxTaskMs: number;
  /** How long a create keeps trying to get its opening written when NATS does not answer (same msgID each time). */
  writeMs: number;
  log: Logger;
}

export interface CreatedTask {
  taskId: number;
  status: "pending" | "running" | "success" | "failed";
  /** Absent when no runner answered within the wait: the task is opened and will still run. */
  providerTaskId?: string;
}

/** Pause between tries of an opening whose publish NATS did not answer. */
const RETRY_PAUSE_MS = 200;

/**
 * Creates a video task with one write: its opening (the first event with the reservation of its estimated
 * cost) appended under the account's money, guarded by the account's last money message (AccountLedger.open),
 * so no task exists without its money and no money is held without a task; the task's own end settles or
 * releases it. Nothing is ever released or compensated here.
 *
 * - An unanswered write is tried again with the same msgID until `writeMs`: a first try that landed is then
 *   found (the stream's duplicate window), never written twice. Past that the answer is 503, and the task
 *   either exists (it runs, shows in the task list, and is charged) or never will: its publish was not taken.
 * - With an Idempotency-Key the opening's msgID is the key's hash, so a retry of any outcome finds the first
 *   task; past the duplicate window the key index (written from each keyed opening) finds it, or the account's
 *   openings while the index lags (keyedTasks.ts). A retry that the balance refuses looks for a create with its
 *   key that just spent the money (keyedOpenings.ts). A key sent with another request is a conflict (422).
 */
export async function createVideoTask(deps: CreateDeps, account: string, request: NormalizedVideoRequest, idempotencyKey: string | undefined): Promise<CreatedTask> {
  // Every step needs NATS; waiting for its timeouts would only turn "try again" into a slow error.
  if (!deps.connection.connected()) throw new ServiceUnavailableError(NATS_DOWN);
  const keyed = idempotencyKey === undefined ? undefined : { keyHash: keyHashOf(idempotencyKey), fingerprint: requestFingerprint(request) };
  if (keyed) {
    const earlier = await deps.keys.find(account, keyed.keyHash);
    if (earlier) return existingTask(deps, account, earlier, keyed.fingerprint);
  }
  const taskId = await deps.taskIds.take();
  const now = new Date();
  const opening = openingTaskEvent(
    {
      taskId,
      account,
      job: request.job,
      ignoredFields: request.ignoredFields,
      deadlineAt: new Date(now.getTime() + deps.maxTaskMs).toISOString(),
      ...(request.callbackUrl ? { callbackUrl: request.callbackUrl } : {}),
      ...(keyed ? { idempotency: keyed } : {}),
    },
    now,
  );
  const msgID = keyed ? keyedOpeningMsgId(account, keyed.keyHash) : `open-${taskId}`;
  const amountMicros = costMicros([{ tokens: request.job.estimatedTokens, pricePerMillionTokens: request.job.pricePerMillionTokens }]);
  // The feed's events of the task are held for the view until the write is answered (TaskViewReader.created).
  deps.views.creating(taskId);
  const written = open(deps, opening, amountMicros, msgID, keyed).then(
    (opened) => {
      if (opened.kind === "ours") deps.views.created(opening);
      else deps.views.notCreated(taskId);
      return opened;
    },
    (error: unknown) => {
      deps.views.notCreated(taskId);
      throw error;
    },
  );
  // Subscribed before the write: a quick upstream's answer can arrive in the feed before the write's acknowledgement.
  const outcome = deps.submissions.submissionOutcome(
    taskId,
    deps.waitMs,
    written.then((opened) => {
      if (opened.kind === "earlier") throw new Error("an earlier create's task is the answer");
    }),
  );
  // Its only failures are the write's, answered below, and "an earlier task": nothing to wait for then.
  outcome.catch(() => undefined);
  const opened = await written;
  if (opened.kind === "earlier") return existingTask(deps, account, opened.task, keyed?.fingerprint ?? "");
  // Crash tests stop an edge here: the task exists, its create was never answered.
  failpoint("create:after-open");
  if (opened.wrote) tasksCreated.inc({ model: request.job.model });
  const answer = await outcome;
  if (answer?.outcome === "rejected") throw new UpstreamRejectedError(`upstream generator refused the task: ${answer.reason}`);
  return { taskId, status: "pending", ...(answer?.outcome === "accepted" ? { providerTaskId: answer.providerTaskId } : {}) };
}

/** This create's task (written now, or by an earlier try of it), or the task an earlier create with its key made. */
type Opened = { kind: "ours"; wrote: boolean } | { kind: "earlier"; task: KeyedTask };

async function open(deps: CreateDeps, opening: TaskSubmittedEvent, amountMicros: number, msgID: string, keyed: { keyHash: string } | undefined): Promise<Opened> {
  const { account } = opening.data;
  try {
    const result = await openWithRetries(deps, opening, amountMicros, msgID);
    if (result.written || result.duplicateOf === undefined) return { kind: "ours", wrote: result.written };
    const first = await openingAt(deps.jsm, result.duplicateOf);
    if (first.meta.taskId === opening.meta.taskId) return { kind: "ours", wrote: false };
    return { kind: "earlier", task: { taskId: first.meta.taskId, fingerprint: first.data.idempotency?.fingerprint ?? "" } };
  } catch (error) {
    const earlier = keyed && error instanceof InsufficientBalanceError ? await recentKeyedOpening(deps.jsm, account, keyed.keyHash) : undefined;
    if (!earlier) throw error;
    return { kind: "earlier", task: earlier };
  }
}

/** Writes the opening; a try NATS did not answer is made again with the same msgID until `writeMs` has passed. */
async function openWithRetries(deps: CreateDeps, opening: TaskSubmittedEvent, amountMicros: number, msgID: string) {
  const giveUpAt = Date.now() + deps.writeMs;
  for (;;) {
    try {
      return await deps.ledger.open(opening, amountMicros, msgID);
    } catch (error) {
      // Lost races for the ledger's whole time: nothing was written, and the answer says so (not "may start").
      if (error instanceof AccountBusyError) throw error;
      const unavailable = asServiceUnavailable(error);
      if (!unavailable) throw error;
      if (Date.now() + RETRY_PAUSE_MS >= giveUpAt) {
        deps.log.warn({ err: error, taskId: opening.meta.taskId, account: opening.data.account }, "a create's opening got no answer from NATS; answering 503");
        throw new ServiceUnavailableError(
          "the task could not be confirmed (the message store did not answer): it may start all the same, and then shows in the task " +
            "list and is charged; retry with the same Idempotency-Key to get the same task",
          unavailable.retryAfterSeconds,
          { cause: error },
        );
      }
      await sleep(RETRY_PAUSE_MS);
    }
  }
}

async function openingAt(jsm: JetStreamManager, sequence: number): Promise<TaskSubmittedEvent> {
  const msg = await jsm.direct.getMessage(STREAMS.events.name, { seq: sequence });
  if (!msg) throw new Error(`no message at sequence ${sequence} of ${STREAMS.events.name}`);
  return TaskOpening.parse(msg.json()).task;
}

const conflict = () =>
  new UnprocessableError(
    "Idempotency-Key was already used with a different request: a key names one request (the first one is not " +
      "replayed for a different body); send a new key for a new request",
  );

/** The task an Idempotency-Key already made, as it is now. */
async function existingTask(deps: CreateDeps, account: string, earlier: KeyedTask, fingerprint: string): Promise<CreatedTask> {
  if (earlier.fingerprint !== fingerprint) throw conflict();
  const view = await deps.views.get(account, earlier.taskId);
  return { taskId: earlier.taskId, status: view?.status ?? "pending", ...(view?.providerTaskId ? { providerTaskId: view.providerTaskId } : {}) };
}
