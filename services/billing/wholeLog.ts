import { ledgerEventsOf, type LedgerEvent } from "../../contracts/ledger.ts";
import { accountOfSubject, isTaskOpeningSubject, TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { ChargeAudit, type ChargeAuditResult } from "./chargeAudit.ts";
import type { Nats } from "../shared/nats.ts";
import { taskMessageBody } from "../shared/taskLog.ts";
import { readWholeStream } from "../shared/projectionReplay.ts";

/** Decoded events of one log message; an undecodable one is none (the projections' dead-letter subject names it). */
function decoded<Event>(decode: () => Event[]): Event[] {
  try {
    return decode();
  } catch {
    return [];
  }
}

/**
 * Every task event and every money event of the log as it stands, in order (an opening is both: its task event
 * first), for audits that fold the whole history.
 */
export async function readWholeLog(nats: Nats, take: { task(account: string, event: TaskEvent, sequence: number): void; money(event: LedgerEvent): void }): Promise<void> {
  await readWholeStream(nats.js, nats.jsm, STREAMS.events.name, STREAMS.events.subjects, (msg) => {
    const raw: unknown = msg.json();
    const money = msg.subject.includes(".money.");
    if (!money || isTaskOpeningSubject(msg.subject)) {
      for (const event of decoded(() => [TaskEvent.parse(taskMessageBody(raw))])) take.task(accountOfSubject(msg.subject), event, msg.seq);
    }
    if (money) for (const event of decoded(() => ledgerEventsOf(raw))) take.money(event);
  });
}

/**
 * "Every success charged exactly once, every failure free", folded over the whole log (`reelay audit charges`);
 * `endedThrough`: see ChargeAudit (tasks ending later are counted as settling).
 */
export async function auditCharges(nats: Nats, endedThrough?: number): Promise<ChargeAuditResult> {
  const audit = new ChargeAudit(endedThrough);
  await readWholeLog(nats, { task: (account, event, sequence) => audit.addTaskEvent(account, event, sequence), money: (event) => audit.addLedgerEvent(event) });
  return audit.result();
}
