import type { CliIo } from "./cliIo.ts";
import { gatherChannels } from "../shared/channelReports.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";

const USAGE = "usage: reelay channels [--json]";

/** `reelay channels`: each runner's channels — in rotation or cooling down, tasks in flight, recent errors. */
export async function channelsCommand(nats: Nats, args: string[], json: boolean, io: CliIo): Promise<number> {
  const { out } = io;
  if (args.length > 0) throw new ValidationError(USAGE);
  const runners = await gatherChannels(nats);
  if (json) {
    out(JSON.stringify(runners, null, 2));
    return runners.length === 0 ? 1 : 0;
  }
  if (runners.length === 0) {
    out("no runner answered: is `reelay serve` (or `reelay serve runner`) running against this NATS?");
    return 1;
  }
  for (const { runner, channels } of runners) {
    out(`runner ${runner}: ${channels[0]?.waiting ?? 0} task(s) waiting for a slot`);
    out("  channel               kind    state          in flight  back at                   last error");
    for (const channel of channels) {
      const last = channel.recentErrors.at(-1);
      out(
        `  ${channel.channel.padEnd(21)} ${channel.kind.padEnd(7)} ${channel.state.padEnd(14)} ${`${channel.inFlight}/${channel.maxInFlight}`.padStart(9)}  ${(channel.backAt ?? "-").padEnd(25)} ${last ? `${last.at} ${last.message}` : "-"}`,
      );
      const cleanup = channel.cleanupFailures;
      if (cleanup) out(`    clean-up failed ${cleanup.count} time(s), the upstream's copies stay (last ${cleanup.last.at}): ${cleanup.last.message}`);
    }
  }
  return 0;
}
