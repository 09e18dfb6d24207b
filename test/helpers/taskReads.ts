import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { TaskLog, type TaskHistory } from "../../services/shared/taskLog.ts";

/** A task's log, named by id alone (as an operator would: its account is looked up first). Empty for no task. */
export async function readTask(nats: { js: JetStreamClient; jsm: JetStreamManager }, taskId: number): Promise<TaskHistory> {
  const taskLog = new TaskLog(nats.js, nats.jsm);
  const account = await taskLog.accountOf(taskId);
  return account === undefined ? { events: [], lastSequence: 0 } : taskLog.read(account, taskId);
}
