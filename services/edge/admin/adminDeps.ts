import type { AccountLedger } from "../../billing/accountLedger.ts";
import type { Nats } from "../../shared/nats.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import type { TaskViewReader } from "../video/taskViewReader.ts";

/** What the admin API's endpoints read and write through. */
export interface AdminDeps {
  nats: Nats;
  ledger: AccountLedger;
  views: TaskViewReader;
  taskLog: TaskLog;
  /** Where task videos are served (the edge's public base). */
  videoBaseUrl: string;
}
