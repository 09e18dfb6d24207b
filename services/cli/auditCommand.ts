import type { CliIo } from "./cliIo.ts";
import { Kvm, type KV } from "@nats-io/kv";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { availableMicros } from "../billing/account.ts";
import { AccountBalance } from "../../contracts/ledger.ts";
import { describeLedgerEvent, readAccountHistory } from "../billing/ledgerReader.ts";
import { formatYuan } from "../billing/pricing.ts";
import { balancesProjection } from "../billing/projections.ts";
import { auditProjection, type ProjectionAudit } from "../shared/projectionAudit.ts";
import type { Projection } from "../shared/projection.ts";
import { taskViewProjection } from "../tasks/taskViewProjection.ts";
import { ServiceUnavailableError, ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";
import { TaskLog } from "../shared/taskLog.ts";
import { foldTaskView } from "../tasks/taskView.ts";
import { auditCharges, readWholeLog } from "../billing/wholeLog.ts";
import { UpstreamAudit } from "../billing/upstreamAudit.ts";

/** Where a command's lines go. */
type Out = (line: string) => void;
const USAGE = "usage: reelay audit replay | audit charges [--json] | audit task <id> | audit account <name> [--json] | audit upstream [--json]";

/**
 * Waits until a projector consumer has applied (acknowledged) everything in its stream, so live and replayed can
 * be compared; resolves to the sequence of the last event it acknowledged.
 */
async function waitForProjector(nats: Nats, stream: string, durable: string): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const info = await nats.jsm.consumers.info(stream, durable);
    if (info.num_pending === 0 && info.num_ack_pending === 0) return info.delivered.stream_seq;
    if (Date.now() > deadline) throw new ServiceUnavailableError(`projector ${durable} is still behind (${info.num_pending} pending); is it running?`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function auditInto<Event, Doc>(nats: Nats, projection: Projection<Event, Doc>, live: KV, durable: string, stamp: string): Promise<ProjectionAudit> {
  await waitForProjector(nats, projection.stream, durable);
  const kvm = new Kvm(nats.js);
  const name = `audit_${projection.name.replace(/\W+/g, "_")}_${stamp}`;
  const fresh = await kvm.create(name);
  try {
    return await auditProjection(nats, projection, live, fresh);
  } finally {
    await fresh.destroy();
  }
}

async function replay(nats: Nats, out: Out): Promise<number> {
  const stamp = String(Date.now());
  const audits = [
    await auditInto(nats, taskViewProjection, nats.taskViews, CONSUMERS.taskLogReactors, stamp),
    await auditInto(nats, balancesProjection, nats.balances, CONSUMERS.taskLogReactors, stamp),
  ];
  let negative = 0;
  for await (const key of await nats.balances.keys()) {
    const doc = AccountBalance.parse((await nats.balances.get(key))?.json());
    if (availableMicros(doc) < 0) negative += 1;
  }
  out("read model       events   events/s  documents  differences");
  for (const audit of audits) {
    const rate = audit.seconds > 0 ? Math.round(audit.events / audit.seconds) : audit.events;
    out(`${audit.projection.padEnd(15)} ${String(audit.events).padStart(7)} ${String(rate).padStart(10)} ${String(audit.documents).padStart(10)} ${String(audit.differences.length).padStart(12)}`);
  }
  const [tasks, accounts] = [audits[0]?.documents ?? 0, audits[1]?.documents ?? 0];
  const differences = audits.flatMap((audit) => audit.differences.map((d) => ({ projection: audit.projection, ...d })));
  out(`accounts ${accounts}, tasks ${tasks}, accounts with negative available balance ${negative}, differences ${differences.length}`);
  for (const difference of differences.slice(0, 20)) out(`DIFF ${JSON.stringify(difference)}`);
  const charged = await charges(nats, false, out);
  return differences.length === 0 && charged === 0 ? 0 : 1;
}

async function taskTimeline(nats: Nats, idText: string | undefined, out: Out): Promise<void> {
  const taskId = Number(idText);
  if (!Number.isInteger(taskId) || taskId <= 0) {
    throw new ValidationError(`${idText === undefined ? "audit task needs a task id" : `audit task needs a task id (a positive integer), got "${idText}"`}\n${USAGE}`);
  }
  const taskLog = new TaskLog(nats.js, nats.jsm);
  const owner = await taskLog.accountOf(taskId);
  if (owner === undefined) throw new ValidationError(`task ${taskId} has no events`);
  const { events } = await taskLog.read(owner, taskId);
  const submitted = events.find((e) => e.type === "TaskSubmitted");
  if (submitted?.type !== "TaskSubmitted") throw new ValidationError(`task ${taskId} has no events`);
  const ledger = (await readAccountHistory(nats.js, nats.jsm, submitted.data.account)).filter(
    (entry) => "taskId" in entry.event.data && entry.event.data.taskId === taskId,
  );
  const lines = [
    ...events.map((e) => ({ at: e.meta.at, text: `${e.type.padEnd(20)} ${JSON.stringify(e.data)}` })),
    ...ledger.map((entry) => ({ at: entry.event.meta.at, text: `${"ledger".padEnd(20)} ${describeLedgerEvent(entry.event, formatYuan)}` })),
  ].sort((a, b) => a.at.localeCompare(b.at));
  out(`task ${taskId} of account ${submitted.data.account}`);
  for (const line of lines) out(`${line.at}  ${line.text}`);
  const view = foldTaskView(events);
  if (view) out(`now: ${view.status}`);
}

async function accountStatement(nats: Nats, account: string | undefined, json: boolean, out: Out): Promise<void> {
  if (!account) throw new ValidationError(`audit account needs a name\n${USAGE}`);
  const history = await readAccountHistory(nats.js, nats.jsm, account);
  if (history.length === 0) throw new ValidationError(`no account named ${account}`);
  if (json) {
    out(JSON.stringify(history.map(({ event, sequence, after }) => ({ sequence, event, balanceMicros: after.balanceMicros, reservedMicros: after.reservedMicros })), null, 2));
    return;
  }
  out("time                      balance      reserved     entry");
  for (const { event, after } of history) {
    out(`${event.meta.at}  ${formatYuan(after.balanceMicros).padStart(11)}  ${formatYuan(after.reservedMicros).padStart(11)}  ${describeLedgerEvent(event, formatYuan)}`);
  }
}

/**
 * Per model and channel, what customers were charged against what the upstreams reported: exit code 1 when
 * a settled task's tokens differ from its upstream's report or a failed task was charged.
 */
async function upstreamUsage(nats: Nats, json: boolean, out: Out): Promise<number> {
  const audit = new UpstreamAudit();
  await readWholeLog(nats, {
    task: (_account, event) => audit.addTaskEvent(event),
    money: (event) => audit.addLedgerEvent(event),
  });
  const rows = audit.rows();
  const problems = rows.reduce((sum, row) => sum + row.mismatched.length + row.chargedFailures.length, 0);
  if (json) {
    out(JSON.stringify(rows, null, 2));
    return problems === 0 ? 0 : 1;
  }
  if (rows.length === 0) {
    out("no video task has ended yet: nothing to set against the upstreams' usage");
    return 0;
  }
  out("model                  channel           ok  failed  upstream tokens  billed for them  estimated (tokens)  upstream s  upstream ¥    charged ¥  mismatched  charged failures");
  for (const row of rows) {
    out(
      `${row.model.padEnd(22)} ${row.channel.padEnd(16)} ${String(row.succeeded).padStart(3)} ${String(row.failed).padStart(7)} ${String(row.upstreamTokens).padStart(16)} ${String(row.billedTokens).padStart(16)} ${`${row.estimated} (${row.estimatedTokens})`.padStart(19)} ${String(row.upstreamSeconds).padStart(11)} ${formatYuan(row.upstreamCostMicros).padStart(11)} ${formatYuan(row.chargedMicros).padStart(12)} ${String(row.mismatched.length).padStart(11)} ${String(row.chargedFailures.length).padStart(17)}`,
    );
  }
  for (const row of rows) {
    for (const taskId of row.mismatched) out(`MISMATCH task ${taskId} (${row.model} on ${row.channel}): billed tokens differ from the upstream's report`);
    for (const taskId of row.chargedFailures) out(`CHARGED FAILURE task ${taskId} (${row.model} on ${row.channel})`);
  }
  return problems === 0 ? 0 : 1;
}

/** "Every success charged exactly once, every failure free", over the whole log: exit code 1 on any problem. */
async function charges(nats: Nats, json: boolean, out: Out): Promise<number> {
  // The projector acknowledges a task's end once its settlement is written: ends up to here must be settled.
  const settledThrough = await waitForProjector(nats, STREAMS.events.name, CONSUMERS.taskLogReactors);
  const { finalTasks, problems, settling } = await auditCharges(nats, settledThrough);
  if (json) out(JSON.stringify({ finalTasks, problems, settling }, null, 2));
  else {
    out(`final tasks ${finalTasks}, charge problems ${problems.length}${settling > 0 ? `, ${settling} ended while the audit ran (not checked)` : ""}`);
    for (const problem of problems.slice(0, 50)) out(`CHARGE task ${problem.taskId} of ${problem.account}: ${problem.problem}`);
  }
  return problems.length === 0 ? 0 : 1;
}

/** `reelay audit …`; resolves to the process exit code. */
export async function auditCommand(nats: Nats, args: string[], json: boolean, io: CliIo): Promise<number> {
  const { out } = io;
  const [action, target] = args;
  switch (action) {
    case "replay":
      return replay(nats, out);
    case "task":
      await taskTimeline(nats, target, out);
      return 0;
    case "account":
      await accountStatement(nats, target, json, out);
      return 0;
    case "upstream":
      return upstreamUsage(nats, json, out);
    case "charges":
      return charges(nats, json, out);
    default:
      throw new ValidationError(USAGE);
  }
}

