import { setTimeout as sleep } from "node:timers/promises";
import { LRUCache } from "lru-cache";
import { ledgerCodec, LedgerSnapshot, ledgerSubject, type LedgerEvent } from "../../contracts/ledger.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { ConcurrencyError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";
import { DuplicateAppendError, SubjectLog } from "../shared/subjectLog.ts";
import { countLedgerEvent } from "./ledgerMetrics.ts";
import { applyLedgerEvent, decideGroup, emptyAccount, isGroupable, type AccountState, type GroupOutcome, type LedgerCommand } from "./account.ts";

/** Lost races in a row before a command gives up (each one means another writer's event got in first). */
const MAX_ATTEMPTS = 20;
/** Accounts whose fold a process keeps; the least recently used is read again from its snapshot. */
const KNOWN_ACCOUNTS = 50_000;
/** A writer saves its whole state every this many events of an account, so a cold start reads little. */
const SNAPSHOT_EVERY = 500;
/** Task commands written together in one message at most (about 64 KiB of events). */
const MAX_GROUP = 256;

interface Waiting {
  command: LedgerCommand;
  resolve(state: AccountState): void;
  reject(error: unknown): void;
}

/**
 * Writes money movements to `ledger.<account>`: fold → decide → append fenced on the last sequence.
 * Each process keeps the accounts it touched folded in memory and writes an account's commands one
 * message at a time; across processes (two edges reserving for one account) the fence decides, and the
 * loser catches up and decides again — so no interleaving can spend more than the balance.
 *
 * Group commit: the task commands (reserve, settle, release) that queued for an account while its last
 * message was on its way are decided in order and written as one message, so a busy account costs one
 * round trip per group instead of one per command (an edge reserving and settlement settling for one
 * account used to trail it by their round trips). Nothing waits to fill a group.
 */
export class AccountLedger {
  private readonly log: SubjectLog<LedgerEvent>;
  private readonly known = new LRUCache<string, AccountState>({ max: KNOWN_ACCOUNTS });
  /** Per account being written: the commands waiting for the message in flight. */
  private readonly waiting = new Map<string, Waiting[]>();

  constructor(private readonly nats: Nats) {
    this.log = new SubjectLog(nats.js, nats.jsm, STREAMS.ledger.name, ledgerCodec);
  }

  /** Runs a command; resolves to the account after it (unchanged when the command was already done). */
  execute(account: string, command: LedgerCommand): Promise<AccountState> {
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(account);
      if (queue) {
        queue.push({ command, resolve, reject });
        return;
      }
      this.waiting.set(account, [{ command, resolve, reject }]);
      void this.writeQueued(account);
    });
  }

  /** The account as the ledger says now (catching up from the last known point). */
  async current(account: string): Promise<AccountState> {
    return this.catchUp(account);
  }

  /** Forget what this process folded (tests use it to act like a restarted process). */
  forget(): void {
    this.known.clear();
  }

  /** Writes the account's queued commands, a group at a time, until none is left. */
  private async writeQueued(account: string): Promise<void> {
    for (let queue = this.waiting.get(account); queue && queue.length > 0; queue = this.waiting.get(account)) {
      const group = nextGroup(queue);
      try {
        const { after, refusals } = await this.commit(account, group.map((waiting) => waiting.command));
        for (const [index, waiting] of group.entries()) {
          if (refusals.has(index)) waiting.reject(refusals.get(index));
          else waiting.resolve(after);
        }
      } catch (error) {
        for (const waiting of group) waiting.reject(error);
      }
    }
    this.waiting.delete(account);
  }

  /** Decides and writes one group: the account after it, and why commands were refused (by their index). */
  private async commit(account: string, commands: readonly LedgerCommand[]): Promise<{ after: AccountState; refusals: Map<number, unknown> }> {
    const cached = this.known.get(account);
    let known = cached ?? (await this.catchUp(account));
    // Deciding on what this process folded earlier is only safe for appends (the fence checks them).
    // A refusal or a no-op decided on a stale fold would miss another process's credit or reservation:
    // a topped-up account refused, a reservation never settled. Those are re-decided on a fresh fold.
    let fresh = cached === undefined;
    for (let attempt = 1; ; attempt++) {
      const { outcomes, events } = decideGroup(known, commands, new Date().toISOString());
      if (!fresh && outcomes.some((outcome) => "refused" in outcome || outcome.events.length === 0)) {
        known = await this.catchUp(account);
        fresh = true;
        continue;
      }
      try {
        const after = await this.append(known, events);
        return { after, refusals: refusalsOf(outcomes) };
      } catch (error) {
        // A single command's msgID is its cause: a duplicate means this very command was already written
        // (a retry). A group's msgID only names its first cause, so a duplicate group is decided again.
        if (error instanceof DuplicateAppendError && commands.length === 1) return { after: await this.catchUp(account), refusals: new Map() };
        if (!(error instanceof ConcurrencyError) || attempt >= MAX_ATTEMPTS) throw error;
        // Writers that keep colliding on one account back off a little, at random, so one gets through.
        if (!(error instanceof DuplicateAppendError)) await sleep(Math.random() * Math.min(50, 2 ** attempt));
        known = await this.catchUp(account);
        fresh = true;
      }
    }
  }

  /** Writes `events` as one message (none: nothing to write, the account stays as it is). */
  private async append(known: AccountState, events: readonly LedgerEvent[]): Promise<AccountState> {
    const first = events[0];
    if (!first) return known;
    const msgID = events.length === 1 ? first.meta.cause : `${first.meta.cause}+${events.length - 1}`;
    const sequence = await this.log.append(ledgerSubject(known.account), events, msgID, known.sequence);
    let state = known;
    for (const event of events) {
      state = applyLedgerEvent(state, event);
      countLedgerEvent(event);
    }
    state = { ...state, sequence };
    this.known.set(known.account, state);
    if (Math.floor(state.version / SNAPSHOT_EVERY) !== Math.floor(known.version / SNAPSHOT_EVERY)) this.saveSnapshot(state);
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

/** Takes the next message's commands off the queue: a run of task commands, or one other command alone. */
function nextGroup(queue: Waiting[]): Waiting[] {
  let size = 1;
  const head = queue[0];
  if (head && isGroupable(head.command)) {
    for (let next = queue[size]; next && size < MAX_GROUP && isGroupable(next.command); next = queue[size]) size++;
  }
  return queue.splice(0, size);
}

function refusalsOf(outcomes: readonly GroupOutcome[]): Map<number, unknown> {
  const refusals = new Map<number, unknown>();
  for (const [index, outcome] of outcomes.entries()) if ("refused" in outcome) refusals.set(index, outcome.refused);
  return refusals;
}
