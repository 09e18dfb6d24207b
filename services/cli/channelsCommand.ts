import type { CliIo } from "./cliIo.ts";
import { fleetChannelReports } from "../shared/channelReports.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";

const USAGE = "usage: reelay channels [--json]";

const byAccount = (counts: Record<string, number>): string =>
  Object.entries(counts)
    .sort(([, a], [, b]) => b - a)
    .map(([account, count]) => `${account} ${count}`)
    .join(", ");

/**
 * `reelay channels`: each channel's fleet-wide use — in rotation or cooling down, tasks in flight and waiting
 * per account, submit rate, recent errors — read from the shared state (bucket `fleet`), not from runners.
 */
export async function channelsCommand(nats: Nats, args: string[], json: boolean, io: CliIo): Promise<number> {
  const { out } = io;
  if (args.length > 0) throw new ValidationError(USAGE);
  const channels = await fleetChannelReports(nats);
  if (json) {
    out(JSON.stringify(channels, null, 2));
    return channels.length === 0 ? 1 : 0;
  }
  if (channels.length === 0) {
    out("no channel reported yet: is a runner (`reelay serve` or `reelay serve runner`) running against this NATS?");
    return 1;
  }
  // Names and kinds as wide as the longest (a `dashscope` channel pushed every column after it out of line).
  const nameWidth = Math.max(21, ...channels.map((channel) => channel.channel.length));
  const kindWidth = Math.max(7, ...channels.map((channel) => channel.kind.length));
  out(`${"channel".padEnd(nameWidth)} ${"kind".padEnd(kindWidth)} state          in flight  waiting  submits/s  back at                   last error`);
  for (const channel of channels) {
    const last = channel.recentErrors.at(-1);
    const rate = channel.submitsPerSecond > 0 ? `${channel.submitRate}/${channel.submitsPerSecond}` : `${channel.submitRate}`;
    out(
      `${channel.channel.padEnd(nameWidth)} ${channel.kind.padEnd(kindWidth)} ${channel.state.padEnd(14)} ${`${channel.inFlight}/${channel.maxInFlight}`.padStart(9)}  ${String(channel.waiting).padStart(7)}  ${rate.padStart(9)}  ${(channel.backAt ?? "-").padEnd(25)} ${last ? `${last.at} ${last.message}` : "-"}`,
    );
    if (channel.inFlight > 0) out(`    in flight by account: ${byAccount(channel.inFlightByAccount)}`);
    if (channel.waiting > 0) out(`    waiting by account: ${byAccount(channel.waitingByAccount)}`);
    if (channel.coolDownReason) out(`    out of rotation because: ${channel.coolDownReason}`);
    const cleanup = channel.cleanupFailures;
    if (cleanup) out(`    clean-up failed ${cleanup.count} time(s), the upstream's copies stay (last ${cleanup.last.at}): ${cleanup.last.message}`);
  }
  return 0;
}
