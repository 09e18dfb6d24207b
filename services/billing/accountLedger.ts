import { setTimeout as sleep } from "node:timers/promises";
import type { MsgHdrs } from "@nats-io/transport-node";
import { lruOf } from "../shared/lruOf.ts";
import { ledgerMessageBody, LedgerSnapshot, ledgerSubject, type LedgerEvent } from "../../contracts/ledger.ts";
import type { TaskOpening } from "../../contracts/taskOpening.ts";
import { taskOpeningSubject, type TaskSubmittedEvent } from "../../contracts/videoTask.ts";
import { AccountBusyError, ConcurrencyError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";
import { traceHeaders } from "../shared/tracing/natsTraceHeaders.ts";
import { countLedgerEvent, countLostWrite } from "./ledgerMetrics.ts";
import { applyMoneyMessage, decideGroup, emptyAccount, isGroupable, type AccountState, type GroupOutcome, type LedgerCommand } from "./account.ts";
import { MONEY_PAGE, MoneyLog } from "./moneyLog.ts";
import { DuplicateAppendError } from "../shared/subjectLog.ts";

/**
 * How long a command keeps trying after lost races (each one means another writer's event got in first) before it
 * gives up with a 503. A time, not a count: on a loaded machine, two processes writing one account at once (two
 * edges, or an edge and a projector of its own) made one lose 20 races in a row, and its create answered 500.
 */
const LOST_RACES_FOR_MS = 10_000;
/** Accounts whose fold a process keeps; the least recently used is read again from its snapshot. */
const KNOWN_ACCOUNTS = 50_000;
/** A writer saves its whole state every this many events of an account, so a cold start reads little. */
const SNAPSHOT_EVERY = 500;
/** Task commands written together in one message at most (about 64 KiB of events). */
const MAX_GROUP = 256;

/** A task's opening to write with its reservation (`open`), and the msgID that makes its retries land once. */
interface Opening {
  event: TaskSubmittedEvent;
  msgID: string;
  /** The create's trace (W3C headers): the runner and settlement continue it from the opening. */
  headers: MsgHdrs | undefined;
}

/**
 * How a task's opening ended: written now; or not written because a message with its msgID already was (at
 * `duplicateOf`: the first try of a retried create), or because its reservation was already open (this
 * very task's opening was written by an earlier try).
 */
export type OpenOutcome = { written: true } | { written: false; duplicateOf?: number };

interface Written {
  after: AccountState;
  /** Whether this command's events were written now (not: nothing to do, or the same message was already there). */
  wrote: boolean;
  /** The message that had the same msgID, when that is why nothing was written. */
  duplicateOf?: number;
}

/** What closing a task's reservation found: closed now, closed by an earlier settlement, or nothing to close. */
export type CloseOutcome = "closed" | "closedBefore" | "notReserved";

interface Waiting {
  command: LedgerCommand;
  opening?: Opening;
  resolve(written: Written): void;
  reject(error: unknown): void;
}

/**
 * Writes money movements under `acct.<account>.money.<epoch>.` (stream EVENTS): fold → decide → append guarded
 * by the sequence of the last money message of the account's epoch (MoneyLog; epochs: contracts/ledger.ts). A task's opening is written here too: one message
 * that starts the task and reserves its cost (`open`).
 * Each process keeps the accounts it touched folded in memory and writes an account's commands one
 * message at a time; across processes (two edges reserving for one account) the fence decides, and the
 * loser catches up and decides again — so no interleaving can spend more than the balance.
 *
 * Group commit: the settlements and releases that queued for an account while its last message was on its
 * way are decided in order and written as one message, so a busy account costs one round trip per group
 * instead of one per task. Nothing waits to fill a group. An opening is always a message of its own (its
 * subject is the task's).
 */
export class AccountLedger {
  private readonly log: MoneyLog;
  private readonly known = lruOf<string, AccountState>(KNOWN_ACCOUNTS);
  /** Per account being written: the commands waiting for the message in flight. */
  private readonly waiting = new Map<string, Waiting[]>();
  /** Accounts with a write under way (one at a time per account: its queue is written in order). */
  private readonly writing = new Set<string>();
  /** Accounts whose queued closes wait for others to join them (`closeLingerMs`), until the timer ends. */
  private readonly lingering = new Map<string, NodeJS.Timeout>();

  /**
   * `closeLingerMs`: a settlement or release that finds its account idle waits this long for others to join its
   * group (SETTLEMENT_LINGER_MS: the ledger settlement closes with, the edge's in `reelay serve`); each close
   * written is a new last money message that a create decided elsewhere on an older fold loses its guard to.
   * Any other command joining the account's queue meanwhile is written at once, ahead of the lingering closes.
   * `lostRacesForMs`: how long a command keeps trying after lost races (LOST_RACES_FOR_MS).
   */
  constructor(
    private readonly nats: Nats,
    private readonly options: { closeLingerMs?: number; lostRacesForMs?: number } = {},
  ) {
    this.log = new MoneyLog(nats.js, nats.jsm);
  }

  /** Runs a command; resolves to the account after it (unchanged when the command was already done). */
  async execute(account: string, command: Exclude<LedgerCommand, { type: "reserve" }>): Promise<AccountState> {
    return (await this.enqueue(account, command)).after;
  }

  /**
   * Starts a task: writes its first event and the reservation of `amountMicros` as one message on
   * `acct.<account>.money.<epoch>.task.<id>`, guarded by the account's money (InsufficientBalanceError when short).
   * A message with the same `msgID` already written (a retry) is found, not written again.
   */
  async open(event: TaskSubmittedEvent, amountMicros: number, msgID: string): Promise<OpenOutcome> {
    const { account } = event.data;
    const { wrote, duplicateOf } = await this.enqueue(account, { type: "reserve", taskId: event.meta.taskId, amountMicros }, { event, msgID, headers: traceHeaders() });
    if (wrote) return { written: true };
    return duplicateOf === undefined ? { written: false } : { written: false, duplicateOf };
  }

  /**
   * Settles or releases a task's reservation. When there is nothing to close, the account's money since the
   * task's opening (at sequence `openedAt`) tells a repeat (closed before) from a task with no reservation,
   * which must never pass as a quiet zero.
   */
  async close(account: string, command: Extract<LedgerCommand, { type: "settle" | "release" }>, openedAt: number): Promise<CloseOutcome> {
    if ((await this.enqueue(account, command)).wrote) return "closed";
    const events = await this.log.read(account, Math.max(0, openedAt - 1));
    const closing = events.find(
      ({ event }) => (event.type === "ReservationSettled" || event.type === "ReservationReleased") && event.data.taskId === command.taskId,
    );
    return closing ? "closedBefore" : "notReserved";
  }

  private enqueue(account: string, command: LedgerCommand, opening?: Opening): Promise<Written> {
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { command, ...(opening ? { opening } : {}), resolve, reject };
      const queue = this.waiting.get(account) ?? [];
      this.waiting.set(account, queue);
      const closing = isGroupable(command);
      const lingering = this.lingering.has(account);
      // A create (or any other command) never waits out the closes' linger: it goes ahead of them (after the others
      // that did), and they go on waiting. It is decided without what they free, as when they lingered in another process.
      if (lingering && !closing) {
        const firstClose = queue.findIndex((queued) => isGroupable(queued.command));
        queue.splice(firstClose === -1 ? queue.length : firstClose, 0, waiting);
      } else queue.push(waiting);
      const linger = this.options.closeLingerMs ?? 0;
      if (closing && linger > 0 && queue.length === 1 && !this.writing.has(account)) {
        this.lingering.set(account, setTimeout(() => this.endLinger(account), linger));
      } else if (!(closing && lingering)) this.startWriting(account);
    });
  }

  /** The account's closes have waited long enough for others to join them: they are written next. */
  private endLinger(account: string): void {
    this.lingering.delete(account);
    this.startWriting(account);
  }

  /** Writes the account's queue unless a write of it is under way (which goes on to what was queued meanwhile). */
  private startWriting(account: string): void {
    if (this.writing.has(account)) return;
    this.writing.add(account);
    void this.writeQueued(account);
  }

  /** The account as the ledger says now (catching up from the last known point). */
  async current(account: string): Promise<AccountState> {
    return this.catchUp(account);
  }

  /** Forget what this process folded (tests use it to act like a restarted process). */
  forget(): void {
    this.known.clear();
  }

  /** Writes the account's queued commands, a group at a time, until none is left or only lingering closes are. */
  private async writeQueued(account: string): Promise<void> {
    const queue = this.waiting.get(account) ?? [];
    for (let head = queue[0]; head && !(isGroupable(head.command) && this.lingering.has(account)); head = queue[0]) {
      const group = nextGroup(queue);
      try {
        const { after, wrote, duplicateOf, outcomes } = await this.commit(account, group);
        for (const [index, waiting] of group.entries()) {
          const outcome = outcomes[index];
          if (outcome && "refused" in outcome) waiting.reject(outcome.refused);
          else waiting.resolve({ after, wrote: wrote && outcome !== undefined && outcome.events.length > 0, ...(duplicateOf === undefined ? {} : { duplicateOf }) });
        }
      } catch (error) {
        for (const waiting of group) waiting.reject(error);
      }
    }
    this.writing.delete(account);
    if (queue.length === 0) this.waiting.delete(account);
  }

  /** Decides and writes one group: the account after it, whether a message was written, and each command's outcome. */
  private async commit(account: string, group: readonly Waiting[]): Promise<Written & { outcomes: GroupOutcome[] }> {
    const commands = group.map((waiting) => waiting.command);
    const opening = group[0]?.opening;
    const cached = this.known.get(account);
    let known = cached ?? (await this.catchUp(account));
    // Deciding on what this process folded earlier is only safe for appends (the guard checks them).
    // A refusal or a no-op decided on a stale fold would miss another process's credit or reservation:
    // a topped-up account refused, a reservation never settled. Those are re-decided on a fresh fold.
    let fresh = cached === undefined;
    const firstTry = performance.now();
    for (let attempt = 1; ; attempt++) {
      const { outcomes, events } = decideGroup(known, commands, new Date().toISOString());
      if (!fresh && outcomes.some((outcome) => "refused" in outcome || outcome.events.length === 0)) {
        known = await this.catchUp(account);
        fresh = true;
        continue;
      }
      try {
        return { ...(await this.append(known, events, opening)), outcomes };
      } catch (error) {
        // A single command's msgID is its cause (an opening's is its own): a duplicate means this very command
        // was already written (a retry). A group's msgID only names its first cause, so a duplicate group is decided again.
        if (error instanceof DuplicateAppendError && commands.length === 1) {
          return { after: await this.catchUp(account), wrote: false, duplicateOf: error.sequence, outcomes };
        }
        if (!(error instanceof ConcurrencyError)) throw error;
        if (performance.now() - firstTry >= (this.options.lostRacesForMs ?? LOST_RACES_FOR_MS)) {
          throw new AccountBusyError({ cause: error });
        }
        // Writers that keep colliding on one account back off a little, at random, so one gets through.
        if (!(error instanceof DuplicateAppendError)) {
          countLostWrite(opening ? "open" : commands.every(isGroupable) ? "close" : "other");
          await sleep(Math.random() * Math.min(50, 2 ** attempt));
        }
        known = await this.catchUp(account);
        fresh = true;
      }
    }
  }

  /**
   * Writes `events` as one message (none: nothing to write, the account stays as it is): a task's opening
   * with its reservation on the task's money subject, anything else on the account's ledger subject.
   */
  private async append(known: AccountState, events: readonly LedgerEvent[], opening: Opening | undefined): Promise<Written> {
    const first = events[0];
    if (!first) return { after: known, wrote: false };
    const { account, epoch, epochSequence } = known;
    const sequence = opening
      ? await this.log.append(account, epoch, taskOpeningSubject(account, opening.event.meta.taskId, epoch), openingBody(opening.event, events), opening.msgID, epochSequence, opening.headers)
      : await this.log.append(account, epoch, ledgerSubject(account, epoch), ledgerMessageBody(events), messageId(events), epochSequence);
    const state = applyMoneyMessage(known, events, sequence);
    for (const event of events) countLedgerEvent(event);
    this.known.set(account, state);
    if (Math.floor(state.version / SNAPSHOT_EVERY) !== Math.floor(known.version / SNAPSHOT_EVERY)) this.saveSnapshot(state);
    return { after: state, wrote: true };
  }

  /**
   * Starts from the last snapshot when this process knows nothing, then reads what came after, epoch by epoch:
   * the message of an epoch's last opening is its last message, and reading goes on in the next epoch.
   */
  private async catchUp(account: string): Promise<AccountState> {
    let state = this.known.get(account) ?? (await this.loadSnapshot(account));
    for (let more = true; more; ) {
      const epoch = state.epoch;
      const page = await this.log.epochPage(account, epoch, state.sequence);
      for (const message of page) state = applyMoneyMessage(state, message.events, message.sequence);
      more = page.length === MONEY_PAGE || state.epoch !== epoch;
    }
    this.known.set(account, state);
    return state;
  }

  private async loadSnapshot(account: string): Promise<AccountState> {
    const entry = await this.nats.ledgerSnapshots.get(account).catch(() => null);
    if (!entry || entry.operation !== "PUT") return emptyAccount(account);
    const { reservations, chatReservations, credits, ...totals } = LedgerSnapshot.parse(entry.json());
    return { ...totals, reservations: new Map(reservations), chatReservations: new Map(chatReservations), credits: new Map(credits) };
  }

  /** Best effort: a lost snapshot only means a longer read at the next cold start. */
  private saveSnapshot(state: AccountState): void {
    const { reservations, chatReservations, credits, ...totals } = state;
    const snapshot: LedgerSnapshot = { ...totals, reservations: [...reservations], chatReservations: [...chatReservations], credits: [...credits] };
    this.nats.ledgerSnapshots.put(state.account, JSON.stringify(snapshot)).catch(() => undefined);
  }
}

/** An opening's message: the task's first event and its reservation (the one event decided for it). */
function openingBody(task: TaskSubmittedEvent, events: readonly LedgerEvent[]): string {
  const [money] = events;
  if (events.length !== 1 || money?.type !== "CostReserved") throw new Error(`task ${task.meta.taskId}: an opening holds one reservation`);
  const opening: TaskOpening = { task, money };
  return JSON.stringify(opening);
}

/**
 * A ledger message's msgID: its commands' events' first cause (and how many), so a retried command lands once.
 * Lapses of expired chat holds ride along with whatever is written next and do not name the message.
 */
function messageId(events: readonly LedgerEvent[]): string {
  const own = events.filter((event) => event.type !== "ChatReservationLapsed");
  const first = own[0] ?? events[0];
  if (!first) throw new Error("a ledger message holds at least one event");
  return own.length <= 1 ? first.meta.cause : `${first.meta.cause}+${own.length - 1}`;
}

/** Takes the next message's commands off the queue: a run of settlements and releases, or one other command alone. */
function nextGroup(queue: Waiting[]): Waiting[] {
  let size = 1;
  const head = queue[0];
  if (head && isGroupable(head.command)) {
    for (let next = queue[size]; next && size < MAX_GROUP && isGroupable(next.command); next = queue[size]) size++;
  }
  return queue.splice(0, size);
}
