import type { StoredMsg } from "@nats-io/jetstream";
import { BlocksRecord, CooldownRecord, ErrorsRecord, FLEET_BUCKET, PolicyRecord, SubmitsRecord, WaitRecord } from "../../contracts/fleet.ts";
import type { ChannelReport } from "../../contracts/runnerControl.ts";
import type { Nats } from "./nats.ts";
import { directMessages } from "./subjectLog.ts";

/** Records read per direct get: a channel has one waiting record per runner and account plus a few. */
const PAGE = 1024;

/** Every channel's fleet-wide use, from the shared state (`reelay channels`, the admin API): no runner is asked. */
export async function fleetChannelReports(nats: Nats, now = Date.now()): Promise<ChannelReport[]> {
  // The bucket keeps one message per key (history 1), so reading its channel subjects in order, page by page,
  // reads each record once, however many waiting records a channel has.
  const records: unknown[] = [];
  for (let from = 1, read = PAGE; read === PAGE; ) {
    read = 0;
    const page = (): Promise<AsyncIterable<StoredMsg>> => nats.jsm.direct.getBatch(`KV_${FLEET_BUCKET}`, { seq: from, next_by_subj: `$KV.${FLEET_BUCKET}.chan.>`, batch: PAGE });
    for await (const msg of directMessages(page)) {
      read++;
      from = msg.seq + 1;
      if (msg.data.length > 0) records.push(msg.json());
    }
  }
  return channelReportsOf(records, now);
}

/** The channels' reports from their records (any order; unreadable ones skipped). Pure. */
export function channelReportsOf(records: readonly unknown[], now: number): ChannelReport[] {
  const reports = new Map<string, ChannelReport>();
  const policies = new Map<string, PolicyRecord>();
  for (const value of records) {
    const policy = PolicyRecord.safeParse(value);
    if (policy.success) policies.set(policy.data.channel, policy.data);
  }
  const report = (channel: string): ChannelReport => {
    const known = reports.get(channel);
    if (known) return known;
    const policy = policies.get(channel);
    const fresh: ChannelReport = {
      channel,
      kind: policy?.kind ?? "unknown",
      state: "in rotation",
      inFlight: 0,
      maxInFlight: policy?.maxInFlight ?? 1,
      inFlightByAccount: {},
      waiting: 0,
      waitingByAccount: {},
      submitsPerSecond: policy?.submitsPerSecond ?? 0,
      submitRate: 0,
      recentErrors: [],
    };
    reports.set(channel, fresh);
    return fresh;
  };
  for (const channel of policies.keys()) report(channel);
  for (const value of records) {
    // In flight: what each runner's live block says its tasks held at its last refresh (a third of a lease at most).
    const blocks = BlocksRecord.safeParse(value);
    if (blocks.success) {
      const row = report(blocks.data.channel);
      for (const block of Object.values(blocks.data.blocks)) {
        if (block.until <= now) continue;
        row.inFlight += block.inUse;
        for (const [account, count] of Object.entries(block.byAccount)) row.inFlightByAccount[account] = (row.inFlightByAccount[account] ?? 0) + count;
      }
      continue;
    }
    const wait = WaitRecord.safeParse(value);
    if (wait.success) {
      if (wait.data.count > 0 && wait.data.until > now) {
        const row = report(wait.data.channel);
        row.waiting += wait.data.count;
        row.waitingByAccount[wait.data.account] = (row.waitingByAccount[wait.data.account] ?? 0) + wait.data.count;
      }
      continue;
    }
    const cooldown = CooldownRecord.safeParse(value);
    if (cooldown.success) {
      if (cooldown.data.until > now) Object.assign(report(cooldown.data.channel), { state: "cooling down", backAt: new Date(cooldown.data.until).toISOString(), coolDownReason: cooldown.data.why });
      continue;
    }
    const submits = SubmitsRecord.safeParse(value);
    if (submits.success) {
      report(submits.data.channel).submitRate = submits.data.recent.filter((at) => at > now - 10_000 && at <= now).length / 10;
      continue;
    }
    const errors = ErrorsRecord.safeParse(value);
    if (errors.success) Object.assign(report(errors.data.channel), { recentErrors: errors.data.recent, ...(errors.data.cleanupFailures ? { cleanupFailures: errors.data.cleanupFailures } : {}) });
  }
  return [...reports.values()].sort((a, b) => a.channel.localeCompare(b.channel));
}
