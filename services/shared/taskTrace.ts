import type { JetStreamManager } from "@nats-io/jetstream";
import { taskSubject } from "../../contracts/videoTask.ts";
import { STREAMS, workSubject } from "../../infra/jetstreamLayout.ts";

/**
 * Whether task N came to be: its job is on WORK (queued or held by a runner) or it has an event on TASKS.
 * A task id with neither belongs to a create that stopped before queueing (an edge that died).
 */
export async function taskHasTrace(jsm: JetStreamManager, taskId: number): Promise<boolean> {
  if (await jsm.direct.getMessage(STREAMS.work.name, { last_by_subj: workSubject(taskId) })) return true;
  return (await jsm.direct.getMessage(STREAMS.tasks.name, { last_by_subj: taskSubject(taskId) })) !== null;
}
