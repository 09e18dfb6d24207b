import type { AdminEndpoint } from "./adminApi.ts";
import { accountEndpoints } from "./adminAccountEndpoints.ts";
import type { AdminDeps } from "./adminDeps.ts";
import { taskEndpoints } from "./adminTaskEndpoints.ts";

/** Every endpoint of the admin API (its events and the console are served beside them: adminListener.ts). */
export function adminEndpoints(deps: AdminDeps): AdminEndpoint[] {
  return [...accountEndpoints(deps), ...taskEndpoints(deps)];
}
