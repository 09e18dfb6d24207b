import { setTimeout as sleep } from "node:timers/promises";
import { ReelayError, ServiceUnavailableError, UnprocessableError } from "../../shared/errors.ts";
import { asServiceUnavailable } from "../../shared/infrastructureErrors.ts";
import { createTask, type CreateDeps, type CreatedTask } from "./createTask.ts";
import { KEY_LIFETIME, REFUSAL_LIFETIME, requestFingerprint, type Claim, type ClaimEntry } from "./idempotencyKeys.ts";
import type { NormalizedVideoRequest } from "./normalizeRequest.ts";
import type { TaskViewReader } from "./taskViewReader.ts";

/**
 * A create with an Idempotency-Key: one task per key, whatever the concurrency, the crashes and the retries.
 *
 * - The first request claims the key (a fenced write: one winner) with the task id it will create and the
 *   request's fingerprint, then reserves and queues as any create, and marks the claim `queued`.
 * - Requests that race it wait for that outcome and answer the same: the task once queued, or the same
 *   refusal (e.g. 20 concurrent creates on an empty account all get the same 403).
 * - A claim still `claimed` after `claimTimeoutMs` belongs to a create that died (its edge crashed between
 *   claiming and queueing). The next retry looks for the task: found, it answers with it; never came to
 *   be, it takes the key over and runs the create itself. A claim never answers with a task that does not
 *   exist. The owner itself gives up before queueing once half that time has passed, so a taken-over key
 *   cannot end with two tasks. (The dead create's reservation is released by the runners' sweeper.)
 * - A key reused with another request is a conflict (422), never a replay of the first request.
 */

/** Rounds of "someone else wrote first": each is a real change of the claim, so this is never reached in practice. */
const MAX_ROUNDS = 20;
const FIRST_PAUSE_MS = 5;
const MAX_PAUSE_MS = 100;

/** The wire answer a raced request repeats when the create it waited for was refused. */
class RepeatedRefusal extends ReelayError {
  constructor(readonly status: ReelayError["status"], message: string) {
    super(message);
  }
}

const WIRE_STATUSES = new Set<number>([400, 401, 403, 404, 413, 422, 429, 500, 502, 503, 504]);
const isWireStatus = (status: number): status is ReelayError["status"] => WIRE_STATUSES.has(status);

function refusalOf(error: unknown): NonNullable<Claim["refusal"]> {
  const known = error instanceof ReelayError ? error : asServiceUnavailable(error);
  return known ? { status: known.status, message: known.message } : { status: 500, message: "internal error" };
}

function repeat(refusal: NonNullable<Claim["refusal"]>): ReelayError {
  if (refusal.status === 503) return new ServiceUnavailableError(refusal.message);
  return new RepeatedRefusal(isWireStatus(refusal.status) ? refusal.status : 500, refusal.message);
}

const conflict = () =>
  new UnprocessableError(
    "Idempotency-Key was already used with a different request: a key names one request (the first one is not " +
      "replayed for a different body); send a new key for a new request",
  );

async function existingTask(views: TaskViewReader, taskId: number): Promise<CreatedTask> {
  const view = await views.get(taskId);
  return { taskId, status: view?.status ?? "pending", ...(view?.providerTaskId ? { providerTaskId: view.providerTaskId } : {}) };
}

export async function createOnce(deps: CreateDeps, account: string, request: NormalizedVideoRequest, key: string): Promise<CreatedTask> {
  const keys = deps.idempotency;
  const fingerprint = requestFingerprint(request);
  let entry = await keys.read(account, key);
  // Set once this request raced the create holding the key: that create's outcome is this request's too.
  let raced = false;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const claim = entry?.claim;
    const refused = claim?.state === "refused";
    if (claim && !refused && claim.fingerprint !== fingerprint) throw conflict();
    if (claim?.state === "queued") return existingTask(deps.views, claim.taskId);
    if (claim?.refusal && refused && raced && claim.fingerprint === fingerprint) throw repeat(claim.refusal);
    if (entry && claim?.state === "claimed") {
      const changed = await waitForChange(deps, account, key, entry);
      if (changed !== "stale") {
        entry = changed;
        raced = true;
        continue;
      }
      if (await deps.taskExists(claim.taskId)) {
        // Its edge died after queueing, before saying so.
        await keys.write(account, key, { ...claim, state: "queued" }, entry.revision, KEY_LIFETIME);
        return existingTask(deps.views, claim.taskId);
      }
      deps.log.warn({ account, taskId: claim.taskId }, "an Idempotency-Key's create stopped before queueing; running it again");
    }
    const taskId = await deps.taskIds.take();
    const mine: Claim = { taskId, fingerprint, state: "claimed", at: new Date().toISOString() };
    const revision = await keys.write(account, key, mine, entry?.revision ?? 0, KEY_LIFETIME);
    if (revision !== undefined) return runAsOwner(deps, account, request, key, mine, revision);
    entry = await keys.read(account, key);
    raced = true;
  }
  throw new ServiceUnavailableError("this Idempotency-Key is changing too fast to answer: try again shortly");
}

/** Polls the claim until it changes or, unchanged, is older than the claim timeout ("stale"). */
async function waitForChange(deps: CreateDeps, account: string, key: string, entry: ClaimEntry): Promise<ClaimEntry | undefined | "stale"> {
  const staleAt = entry.storedAt + deps.claimTimeoutMs;
  let pause = FIRST_PAUSE_MS;
  while (Date.now() < staleAt) {
    await sleep(Math.max(1, Math.min(pause, staleAt - Date.now())));
    pause = Math.min(pause * 2, MAX_PAUSE_MS);
    const now = await deps.idempotency.read(account, key);
    if (now?.revision !== entry.revision) return now;
  }
  return "stale";
}

async function runAsOwner(
  deps: CreateDeps,
  account: string,
  request: NormalizedVideoRequest,
  key: string,
  claim: Claim,
  revision: number,
): Promise<CreatedTask> {
  const keys = deps.idempotency;
  const claimedAt = Date.now();
  let queued = false;
  try {
    return await createTask(deps, account, request, claim.taskId, {
      beforeQueue: () => {
        // Past half the timeout a retry may be about to take the key over: queueing now could make two tasks.
        if (Date.now() - claimedAt > deps.claimTimeoutMs / 2) {
          throw new ServiceUnavailableError("the create took too long: retry it with the same Idempotency-Key");
        }
      },
      queued: () => {
        queued = true;
        keys.write(account, key, { ...claim, state: "queued" }, revision, KEY_LIFETIME).catch((error: unknown) =>
          // Harmless: a retry finds the task by its trace once the claim looks stale.
          deps.log.warn({ err: error, account, taskId: claim.taskId }, "could not mark an Idempotency-Key queued"),
        );
      },
    });
  } catch (error) {
    if (!queued) {
      // Waiting duplicates answer this too. If it cannot be written, the claim goes stale and is run again.
      await keys.write(account, key, { ...claim, state: "refused", refusal: refusalOf(error) }, revision, REFUSAL_LIFETIME).catch(() => undefined);
    }
    throw error;
  }
}
