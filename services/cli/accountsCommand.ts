import type { CliIo } from "./cliIo.ts";
import { randomUUID } from "node:crypto";
import { AccountName } from "../../contracts/apiKey.ts";
import { AccountBalance } from "../../contracts/ledger.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { availableMicros } from "../billing/account.ts";
import { describeLedgerEvent, readAccountHistory } from "../billing/ledgerReader.ts";
import { creditCommand, parseCreditLimit } from "../billing/credits.ts";
import { formatYuan, parseYuan } from "../billing/pricing.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";

const USAGE =
  "usage: reelay accounts create <name> | accounts credit <name> <yuan> [--idempotency-key <key>] | accounts limit <name> <yuan> | accounts show <name> | accounts list";

function accountName(action: string, name: string | undefined): string {
  if (name === undefined) throw new ValidationError(`accounts ${action} needs an account name\n${USAGE}`);
  const parsed = AccountName.safeParse(name);
  if (!parsed.success) throw new ValidationError(`${parsed.error.issues[0]?.message ?? "bad account name"}\n${USAGE}`);
  return parsed.data;
}

/** `reelay accounts …`: every change is an event on acct.<account>.money.<epoch>.ledger; reads fold the account's money events. */
export async function accountsCommand(nats: Nats, args: string[], options: { idempotencyKey: string | undefined }, io: CliIo): Promise<void> {
  const { out } = io;
  const ledger = new AccountLedger(nats);
  const [action, name, amount] = args;
  switch (action) {
    case "create": {
      const account = accountName(action, name);
      const before = await ledger.current(account);
      await ledger.execute(account, { type: "open" });
      out(before.exists ? `account ${account} already exists` : `created account ${account}`);
      return;
    }
    case "credit": {
      const account = accountName(action, name);
      if (amount === undefined) throw new ValidationError(`accounts credit needs an amount in yuan\n${USAGE}`);
      let micros: number;
      try {
        micros = parseYuan(amount);
      } catch (error) {
        throw new ValidationError((error as Error).message);
      }
      await ledger.execute(account, { type: "open" });
      const after = await ledger.execute(account, creditCommand(account, micros, { idempotencyKey: options.idempotencyKey, note: "reelay accounts credit" }));
      out(`credited ${formatYuan(micros)} yuan to ${account}; balance ${formatYuan(after.balanceMicros)}, available ${formatYuan(availableMicros(after))}`);
      return;
    }
    case "limit": {
      const account = accountName(action, name);
      if (amount === undefined) throw new ValidationError(`accounts limit needs an amount in yuan (0: no debt)\n${USAGE}`);
      let micros: number;
      try {
        micros = parseCreditLimit(amount);
      } catch (error) {
        throw new ValidationError((error as Error).message);
      }
      if (!(await ledger.current(account)).exists) throw new ValidationError(`no account named ${account}`);
      const after = await ledger.execute(account, { type: "setCreditLimit", limitMicros: micros, changeId: randomUUID() });
      out(`credit limit of ${account} is ${formatYuan(micros)} yuan; available ${formatYuan(availableMicros(after))}`);
      return;
    }
    case "show": {
      const account = accountName(action, name);
      const history = await readAccountHistory(nats.js, nats.jsm, account);
      const now = history.at(-1)?.after;
      if (!now) throw new ValidationError(`no account named ${account}`);
      out(`account    ${account}`);
      out(`balance    ${formatYuan(now.balanceMicros)} yuan`);
      out(`reserved   ${formatYuan(now.reservedMicros)} yuan (${now.openReservations} open tasks)`);
      out(`available  ${formatYuan(availableMicros(now))} yuan`);
      out(`credit limit ${formatYuan(now.creditLimitMicros)} yuan (how far below zero the balance may go)`);
      out("last entries:");
      for (const entry of history.slice(-10)) {
        out(`  ${entry.event.meta.at}  ${describeLedgerEvent(entry.event, formatYuan)}  → balance ${formatYuan(entry.after.balanceMicros)}`);
      }
      return;
    }
    case "list": {
      const rows: string[] = [];
      for await (const key of await nats.balances.keys()) {
        const entry = await nats.balances.get(key);
        if (!entry || entry.operation !== "PUT") continue;
        const doc = AccountBalance.parse(entry.json());
        rows.push(`${doc.account}\tbalance ${formatYuan(doc.balanceMicros)}\treserved ${formatYuan(doc.reservedMicros)}\tavailable ${formatYuan(availableMicros(doc))}`);
      }
      out(rows.length === 0 ? "no accounts" : rows.sort().join("\n"));
      return;
    }
    default:
      throw new ValidationError(USAGE);
  }
}
