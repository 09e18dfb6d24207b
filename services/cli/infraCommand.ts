import type { CliIo } from "./cliIo.ts";
import { describeChanges, planLayoutChanges } from "../../infra/layoutPlan.ts";
import type { LayoutOptions } from "../../infra/jetstreamLayout.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";

const USAGE = "usage: reelay infra plan | infra apply";

/**
 * `reelay infra plan` shows how the running streams and consumers differ from the configured layout
 * (REELAY_REPLICAS, the runner's leaseMs); `reelay infra apply` shows the same and then changes them.
 * Nothing else ever changes an existing stream or consumer.
 */
export async function infraCommand(nats: Nats, args: string[], layout: LayoutOptions, io: CliIo): Promise<void> {
  const [action] = args;
  if (action !== "plan" && action !== "apply") throw new ValidationError(USAGE);
  const plan = await planLayoutChanges(nats.jsm, layout);
  io.out(`${describeChanges(plan.changes)}`);
  if (action === "plan" || plan.changes.length === 0) return;
  await plan.apply();
  io.out(`applied ${plan.changes.length} change${plan.changes.length === 1 ? "" : "s"}`);
}
