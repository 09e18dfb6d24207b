import { z } from "zod";
import { CostReserved } from "./ledger.ts";
import { TaskSubmitted } from "./videoTask.ts";

/**
 * The one message that starts task N of account A, on `acct.A.money.<epoch>.task.N` (stream EVENTS): the task's first
 * event and the reservation of its estimated cost, written together by one publish guarded by the last
 * sequence over the subjects of the account's money epoch. There is no task without its reservation and no reservation
 * without its task; the task's end settles or releases it. The task log reads `task`, the ledger `money`.
 */
export const TaskOpening = z.object({ task: TaskSubmitted, money: CostReserved });
export type TaskOpening = z.infer<typeof TaskOpening>;
