import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { AdminAction } from "../../../contracts/admin.ts";
import { AccountSummary, ApiKeySummary, CreateAccountBody, CreatedApiKey, CreditBody, CreditLimitBody, LedgerPage, LedgerQuery } from "../../../contracts/adminApi.ts";
import { AccountName } from "../../../contracts/apiKey.ts";
import { AccountBalance } from "../../../contracts/ledger.ts";
import { availableMicros, type AccountState } from "../../billing/account.ts";
import { describeLedgerEvent, readAccountHistory } from "../../billing/ledgerReader.ts";
import { creditCommand, parseCreditLimit } from "../../billing/credits.ts";
import { formatYuan, parseYuan } from "../../billing/pricing.ts";
import { ApiKeyStore } from "../../shared/apiKeys.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import { endpoint, type AdminEndpoint } from "./adminApi.ts";
import type { AdminDeps } from "./adminDeps.ts";

const summaryOf = (state: AccountState): z.infer<typeof AccountSummary> => ({
  name: state.account,
  balance: formatYuan(state.balanceMicros),
  reserved: formatYuan(state.reservedMicros),
  available: formatYuan(availableMicros(state)),
  credit_limit: formatYuan(state.creditLimitMicros),
});

const accountOf = (name: string | undefined): string => {
  const parsed = AccountName.safeParse(name);
  if (!parsed.success) throw new ValidationError(parsed.error.issues[0]?.message ?? "bad account name");
  return parsed.data;
};

/** The admin API's accounts, their money, ledger and keys. */
export function accountEndpoints(deps: AdminDeps): AdminEndpoint[] {
  const { nats, ledger } = deps;
  const keys = new ApiKeyStore(nats.apiKeys);
  /** Every change is an event with its actor: who credited whom stays in the log. */
  const record = async (action: Omit<AdminAction, "at">): Promise<void> => {
    const entry: AdminAction = { at: new Date().toISOString(), ...action };
    await nats.js.publish(`adminlog.${action.action}`, JSON.stringify(entry));
  };
  const existing = async (name: string): Promise<AccountState> => {
    const state = await ledger.current(accountOf(name));
    if (!state.exists) throw new NotFoundError(`no account named ${name}`);
    return state;
  };

  return [
    endpoint({
      method: "GET",
      path: "/accounts",
      summary: "Every account with its balance, reserved and available yuan",
      response: z.object({ accounts: z.array(AccountSummary) }),
      async handle() {
        const accounts: Array<z.infer<typeof AccountSummary>> = [];
        for await (const key of await nats.balances.keys()) {
          const entry = await nats.balances.get(key);
          if (entry?.operation !== "PUT") continue;
          const doc = AccountBalance.parse(entry.json());
          accounts.push({ name: doc.account, balance: formatYuan(doc.balanceMicros), reserved: formatYuan(doc.reservedMicros), available: formatYuan(availableMicros(doc)), credit_limit: formatYuan(doc.creditLimitMicros) });
        }
        return { accounts: accounts.sort((a, b) => a.name.localeCompare(b.name)) };
      },
    }),
    endpoint({
      method: "POST",
      path: "/accounts",
      summary: "Open an account (balance 0)",
      body: CreateAccountBody,
      response: AccountSummary,
      status: 201,
      async handle({ actor, body }) {
        const before = await ledger.current(body.name);
        if (before.exists) throw new ValidationError(`account ${body.name} already exists`);
        const state = await ledger.execute(body.name, { type: "open" });
        await record({ actor, action: "account.create", target: body.name });
        return summaryOf(state);
      },
    }),
    endpoint({
      method: "GET",
      path: "/accounts/{name}",
      summary: "One account's balance, reserved and available yuan",
      response: AccountSummary,
      handle: async ({ params }) => summaryOf(await existing(params.name ?? "")),
    }),
    endpoint({
      method: "POST",
      path: "/accounts/{name}/credit",
      summary: "Add prepaid balance (yuan as a decimal string, exact to the micro-yuan); an Idempotency-Key header makes a retry land once",
      body: CreditBody,
      response: AccountSummary,
      async handle({ actor, body, params, request }) {
        const account = (await existing(params.name ?? "")).account;
        let micros: number;
        try {
          micros = parseYuan(body.amount);
        } catch (error) {
          throw new ValidationError((error as Error).message);
        }
        if (micros <= 0) throw new ValidationError("amount must be more than 0");
        // With an Idempotency-Key a retried credit lands once and answers the account as it is.
        const command = creditCommand(account, micros, { idempotencyKey: request.header("idempotency-key") || undefined, note: body.note ?? "admin API credit", actor });
        const state = await ledger.execute(account, command);
        await record({ actor, action: "account.credit", target: account, detail: { amount: formatYuan(micros) } });
        return summaryOf(state);
      },
    }),
    endpoint({
      method: "POST",
      path: "/accounts/{name}/credit-limit",
      summary: "Set how far below zero the account's balance may go (yuan; 0, the default, allows no debt)",
      body: CreditLimitBody,
      response: AccountSummary,
      async handle({ actor, body, params }) {
        const account = (await existing(params.name ?? "")).account;
        let micros: number;
        try {
          micros = parseCreditLimit(body.limit);
        } catch (error) {
          throw new ValidationError((error as Error).message);
        }
        const state = await ledger.execute(account, { type: "setCreditLimit", limitMicros: micros, changeId: randomUUID(), actor });
        await record({ actor, action: "account.credit_limit", target: account, detail: { limit: formatYuan(micros) } });
        return summaryOf(state);
      },
    }),
    endpoint({
      method: "GET",
      path: "/accounts/{name}/ledger",
      summary: "An account's ledger, newest first, with the balance after each entry",
      query: LedgerQuery,
      response: LedgerPage,
      async handle({ params, query }) {
        const account = (await existing(params.name ?? "")).account;
        const history = (await readAccountHistory(nats.js, nats.jsm, account)).filter((entry) => query.before === undefined || entry.sequence < query.before).reverse();
        // Entries of one message (a group commit) share its sequence, the page cursor: a page ends between messages.
        let end = Math.min(query.limit, history.length);
        while (end < history.length && history[end]?.sequence === history[end - 1]?.sequence) end++;
        const page = history.slice(0, end);
        return {
          entries: page.map((entry) => ({
            sequence: entry.sequence,
            at: entry.event.meta.at,
            type: entry.event.type,
            description: describeLedgerEvent(entry.event, formatYuan),
            balance: formatYuan(entry.after.balanceMicros),
            ...(entry.event.type === "AccountCredited" && entry.event.data.actor ? { actor: entry.event.data.actor } : {}),
          })),
          next_before: history.length > page.length ? (page.at(-1)?.sequence ?? null) : null,
        };
      },
    }),
    endpoint({
      method: "GET",
      path: "/accounts/{name}/keys",
      summary: "An account's API keys (ids only: keys are never stored)",
      response: z.object({ keys: z.array(ApiKeySummary) }),
      async handle({ params }) {
        const account = (await existing(params.name ?? "")).account;
        return { keys: (await keys.list(account)).map((key) => ({ id: key.keyId, account: key.account, created_at: key.createdAt })) };
      },
    }),
    endpoint({
      method: "POST",
      path: "/accounts/{name}/keys",
      summary: "Create an API key for the account; the key is in this answer only",
      response: CreatedApiKey,
      status: 201,
      async handle({ actor, params }) {
        const account = (await existing(params.name ?? "")).account;
        const { key, keyId } = await keys.create(account);
        await record({ actor, action: "key.create", target: keyId, detail: { account } });
        return { id: keyId, account, created_at: new Date().toISOString(), key };
      },
    }),
    endpoint({
      method: "DELETE",
      path: "/keys/{id}",
      summary: "Revoke an API key (edges refuse it within seconds)",
      response: ApiKeySummary,
      async handle({ actor, params }) {
        const revoked = await keys.revoke(params.id ?? "");
        await record({ actor, action: "key.revoke", target: revoked.keyId, detail: { account: revoked.account } });
        return { id: revoked.keyId, account: revoked.account, created_at: revoked.createdAt };
      },
    }),
  ];
}
