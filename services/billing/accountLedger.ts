import { setTimeout as sleep } from "node:timers/promises";
import { LRUCache } from "lru-cache";
import { LedgerEvent, LedgerSnapshot, ledgerSubject, type NewLedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";
import { DuplicateAppendError, SubjectLog } from "../shared/subjectLog.ts";
import { countLedgerEvent } from "./ledgerMetrics.ts";
import { applyLedgerEvent, causeOf, decideLedger, emptyAccount, type AccountState, type LedgerCommand } from "./account.ts";

/** Lost races in a row before a command gives up (each one means another writer's event got in first). */
const MAX_ATTEMPTS = 20;
/** Accounts whose fold a process keeps; the least recently used is read again from its snapshot. */
const KNOWN_ACCOUNTS = 50_000;
/** A writer saves its whole state every this many events of an account, so a cold start reads little. */
const SNAPSHOT_EVERY = 500;

/**
 * Writes money movements to `ledger.<account>`: fold → decide → append fenced on the last sequence.
 * Each process keeps the accounts it touched folded in memory and serializes its own commands per
 * account; across processes (two edges reserving for one account) the fence decides, and the loser
 * catches up and decides again — so no interleaving can spend more than the balance.
 */
export class AccountLedger {
  private readonly log: SubjectLog<LedgerEvent>;
  private readonly known = new LRUCache<string, AccountState>({ max: KNOWN_ACCOUNTS });
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly nats: Nats) {
    this.log = new SubjectLog(nats.js, nats.jsm, STREAMS.ledger.name, (raw) => LedgerEvent.parse(raw));
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
    return this.catchUp(account);
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
        events = decideLedger(known, command);
      } catch (error) {
        if (fresh) throw error;
        events = [];
      }
      if (events.length === 0) {
        if (fresh) return known;
        known = await this.catchUp(account);
        fresh = true;
        continue;
      }
      try {
        return await this.append(account, known, events, causeOf(command, account));
      } catch (error) {
        // Ledger msgIDs are causes: a duplicate means this very command was already written (a retry).
        if (error instanceof DuplicateAppendError) return this.catchUp(account);
        if (!(error instanceof ConcurrencyError) || attempt >= MAX_ATTEMPTS) throw error;
        // Writers that keep colliding on one account back off a little, at random, so one gets through.
        await sleep(Math.random() * Math.min(50, 2 ** attempt));
        known = await this.catchUp(account);
        fresh = true;
      }
    }
  }

  private async append(account: string, known: AccountState, events: NewLedgerEvent[], cause: string): Promise<AccountState> {
    let state = known;
    for (const [index, event] of events.entries()) {
      const meta = { schema: 1 as const, account, version: state.version + 1, at: new Date().toISOString(), cause };
      const full = { ...event, meta } as LedgerEvent;
      const sequence = await this.log.append(ledgerSubject(account), full, index === 0 ? cause : `${cause}-${index}`, state.sequence);
      state = { ...applyLedgerEvent(state, full), sequence };
      this.known.set(account, state);
      countLedgerEvent(full);
      if (state.version % SNAPSHOT_EVERY === 0) this.saveSnapshot(state);
    }
    return state;
  }

  /** Starts from the last snapshot when this process knows nothing, then reads what came after. */
  private async catchUp(account: string): Promise<AccountState> {
    let state = this.known.get(account) ?? (await this.loadSnapshot(account));
    const { events } = await this.log.read(ledgerSubject(account), state.sequence);
    for (const { event, sequence } of events) state = { ...applyLedgerEvent(state, event), sequence };
    this.known.set(account, state);
    return state;
  }

  private async loadSnapshot(account: string): Promise<AccountState> {
    const entry = await this.nats.ledgerSnapshots.get(account).catch(() => null);
    if (!entry || entry.operation !== "PUT") return emptyAccount(account);
    const { reservations, ...totals } = LedgerSnapshot.parse(entry.json());
    return { ...totals, reservations: new Map(reservations) };
  }

  /** Best effort: a lost snapshot only means a longer read at the next cold start. */
  private saveSnapshot(state: AccountState): void {
    const { reservations, ...totals } = state;
    const snapshot: LedgerSnapshot = { ...totals, reservations: [...reservations] };
    this.nats.ledgerSnapshots.put(state.account, JSON.stringify(snapshot)).catch(() => undefined);
  }
}
