import type { JetStreamManager } from "@nats-io/jetstream";
import { taskSubject } from "../../contracts/videoTask.ts";
import { LEGACY_WORK, STREAMS } from "../../infra/jetstreamLayout.ts";

/**
 * Whether task N came to be: it has its first event on TASKS, or (on a store an older reelay used) its
 * job waits on WORK. A task id with neither belongs to a create that stopped before writing it (an edge
 * that died).
 */
export async function taskHasTrace(jsm: JetStreamManager, taskId: number): Promise<boolean> {
  if ((await jsm.direct.getMessage(STREAMS.tasks.name, { last_by_subj: taskSubject(taskId) })) !== null) return true;
  return (await jsm.direct.getMessage(LEGACY_WORK.stream, { last_by_subj: LEGACY_WORK.subject(taskId) }).catch(() => null)) !== null;
}
