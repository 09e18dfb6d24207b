import type { AccountLedger } from "../../billing/accountLedger.ts";
import type { Nats } from "../../shared/nats.ts";
import type { TaskLog } from "../../shared/taskLog.ts";
import type { TaskViewReader } from "../video/taskViewReader.ts";
import type { AdminEndpoint } from "./adminApi.ts";
import { accountEndpoints } from "./adminAccountEndpoints.ts";
import { taskEndpoints } from "./adminTaskEndpoints.ts";

export interface AdminDeps {
  nats: Nats;
  ledger: AccountLedger;
  views: TaskViewReader;
  taskLog: TaskLog;
  /** Where task videos are served (the edge's public base). */
  videoBaseUrl: string;
}

/** Every endpoint of the admin API (its events and the console are served beside them: adminListener.ts). */
export function adminEndpoints(deps: AdminDeps): AdminEndpoint[] {
  return [...accountEndpoints(deps), ...taskEndpoints(deps)];
}
