import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { AccountBalance, LedgerEvent, ledgerSubject, type NewLedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import { DuplicateAppendError, SubjectLog } from "../shared/subjectLog.ts";
import { applyLedgerEvent, causeOf, decideLedger, emptyAccount, type AccountState, type LedgerCommand } from "./account.ts";

interface Known {
  state: AccountState;
  /** Stream sequence of the last event folded into `state`. */
  sequence: number;
}

const MAX_ATTEMPTS = 100;

/**
 * Writes money movements to `ledger.<account>`: fold → decide → append fenced on the last sequence.
 * Each process keeps the accounts it touched folded in memory and serializes its own commands per
 * account; across processes (two edges reserving for one account) the fence decides, and the loser
 * catches up and decides again — so no interleaving can spend more than the balance.
 */
export class AccountLedger {
  private readonly log: SubjectLog<LedgerEvent>;
  private readonly known = new Map<string, Known>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(js: JetStreamClient, jsm: JetStreamManager, private readonly balances: KV) {
    this.log = new SubjectLog(js, jsm, STREAMS.ledger.name, (raw) => LedgerEvent.parse(raw));
  }

  /** Runs a command; resolves to the account after it (unchanged when the command was already done). */
  execute(account: string, command: LedgerCommand): Promise<AccountState> {
    const previous = this.queues.get(account) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(() => this.attempt(account, command));
    this.queues.set(account, run);
    void run.finally(() => {
      if (this.queues.get(account) === run) this.queues.delete(account);
    }).catch(() => undefined);
    return run;
  }

  /** The account as the ledger says now (catching up from the last known point). */
  async current(account: string): Promise<AccountState> {
    return (await this.catchUp(account)).state;
  }

  /** Forget what this process folded (tests use it to act like a restarted process). */
  forget(): void {
    this.known.clear();
  }

  private async attempt(account: string, command: LedgerCommand): Promise<AccountState> {
    const cached = this.known.get(account);
    let known = cached ?? (await this.catchUp(account));
    // Deciding on what this process folded earlier is only safe for appends (the fence checks them).
    // A refusal or a no-op decided on a stale fold would miss another process's credit or reservation:
    // a topped-up account refused, a reservation never settled. Those are re-decided on a fresh fold.
    let fresh = cached === undefined;
    for (let attempt = 1; ; attempt++) {
      let events: NewLedgerEvent[];
      try {
        events = decideLedger(known.state, command);
      } catch (error) {
        if (fresh) throw error;
        events = [];
      }
      if (events.length === 0) {
        if (fresh) return known.state;
        known = await this.catchUp(account);
        fresh = true;
        continue;
      }
      try {
        known = await this.append(account, known, events, causeOf(command, account));
        return known.state;
      } catch (error) {
        // Ledger msgIDs are causes: a duplicate means this very command was already written (a retry).
        if (error instanceof DuplicateAppendError) return (await this.catchUp(account)).state;
        if (!(error instanceof ConcurrencyError) || attempt >= MAX_ATTEMPTS) throw error;
        known = await this.catchUp(account);
        fresh = true;
      }
    }
  }

  private async append(account: string, known: Known, events: NewLedgerEvent[], cause: string): Promise<Known> {
    let { state, sequence } = known;
    for (const [index, event] of events.entries()) {
      const full = LedgerEvent.parse({ ...event, meta: { schema: 1, account, version: state.version + 1, at: new Date().toISOString(), cause } });
      sequence = await this.log.append(ledgerSubject(account), full, index === 0 ? cause : `${cause}-${index}`, sequence);
      state = applyLedgerEvent(state, full);
      this.known.set(account, { state, sequence });
    }
    return { state, sequence };
  }

  /** Starts from the projected balance (a snapshot) when this process knows nothing, then reads what came after. */
  private async catchUp(account: string): Promise<Known> {
    let known = this.known.get(account) ?? (await this.snapshot(account));
    const { events } = await this.log.read(ledgerSubject(account), known.sequence);
    for (const { event, sequence } of events) known = { state: applyLedgerEvent(known.state, event), sequence };
    this.known.set(account, known);
    return known;
  }

  private async snapshot(account: string): Promise<Known> {
    const entry = await this.balances.get(account).catch(() => null);
    if (!entry || entry.operation !== "PUT") return { state: emptyAccount(account), sequence: 0 };
    const { sequence, ...state } = BalanceSnapshot.parse(entry.json());
    return { state, sequence };
  }
}

/** What the balances projection stores: the account fold plus the stream sequence it reflects. */
export const BalanceSnapshot = AccountBalance.extend({ sequence: AccountBalance.shape.version });
