import type { JetStreamClient, JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { accountOfSubject, laterEventKind, TaskEvent, taskEventsSubject, isTaskOpeningSubject, taskLaterSubjects, taskOpeningFilter, type NewTaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { directMessages, guardedPublish, SubjectLog, type MessageCodec } from "./subjectLog.ts";
import { traceHeaders } from "./tracing/natsTraceHeaders.ts";

/**
 * A task log message holds one event: a later event as itself, or a task's opening (contracts/taskOpening.ts),
 * whose `task` part is the task's first event (its `money` part is the ledger's).
 */
export const taskEventCodec: MessageCodec<TaskEvent> = {
  decode: (raw) => [TaskEvent.parse(taskMessageBody(raw))],
  encode: (events) => {
    if (events.length !== 1) throw new Error(`the task log holds one event per message, not ${events.length}`);
    return JSON.stringify(events[0]);
  },
};

/** The task event a task log message holds, still to be parsed: an opening's `task` part, or the message itself. */
export function taskMessageBody(raw: unknown): unknown {
  return typeof raw === "object" && raw !== null && "task" in raw ? raw.task : raw;
}

/** A task event as the reactors on the whole log get it: decoded once, with its account, stream sequence and message (headers). */
export interface TaskLogEntry {
  event: TaskEvent;
  /** The account the task belongs to (from the subject: every task subject is under `acct.<account>.`). */
  account: string;
  seq: number;
  msg: JsMsg;
}

export interface TaskHistory {
  events: TaskEvent[];
  /**
   * Stream sequence of the task's last later event (0 when it has none yet): the fence for the next append.
   * The opening never needs a fence after it is written: only later events follow it.
   */
  lastSequence: number;
}

/**
 * Reads and appends one task's events in stream EVENTS. The opening (TaskSubmitted with its reservation,
 * written by the edge through the account's ledger) is on `acct.<account>.money.<epoch>.task.<id>`; every later one
 * on `acct.<account>.task.<id>.<kind>` (contracts/videoTask.ts), fenced on the last of them all. A read asks
 * for the last message of each of the task's subjects at once (the server's subject index: no scan); a task
 * holds one opening and one acceptance, so only a `state` subject with several events is read further, as a
 * batch of that one literal subject. A task is only found under its own account.
 */
export class TaskLog {
  private readonly log: SubjectLog<TaskEvent>;

  constructor(private readonly js: JetStreamClient, private readonly jsm: JetStreamManager) {
    this.log = new SubjectLog(js, jsm, STREAMS.events.name, taskEventCodec);
  }

  /** The task's events with their stream sequences (the ids clients resume event streams from). */
  async history(account: string, taskId: number): Promise<Array<{ event: TaskEvent; sequence: number }>> {
    return (await this.readAll(account, taskId)).events;
  }

  async read(account: string, taskId: number): Promise<TaskHistory> {
    const { events, lastSequence } = await this.readAll(account, taskId);
    return { events: events.map(({ event }) => event), lastSequence };
  }

  /** Appends `event` as version `version` of the task, fenced on `expectedLastSequence` (see TaskHistory). */
  async append(
    account: string,
    taskId: number,
    event: NewTaskEvent,
    version: number,
    expectedLastSequence: number,
  ): Promise<{ event: TaskEvent; sequence: number }> {
    // Built from typed parts: no parse needed on the way out (events are parsed where they are read back).
    const full = { ...event, meta: { schema: 1, taskId, version, at: new Date().toISOString() } } as TaskEvent;
    // The event carries the writer's trace (W3C headers): reactors on the log (settlement) continue it.
    const sequence = await guardedPublish(this.js, taskEventsSubject(account, taskId, laterEventKind(event.type)), taskEventCodec.encode([full]), {
      msgID: `task-${taskId}-v${version}`,
      expectedLastSequence,
      guard: taskLaterSubjects(account, taskId),
      headers: traceHeaders(),
    });
    return { event: full, sequence };
  }

  /**
   * The account task `taskId` belongs to, for operators who name a task by its id alone: one direct get over
   * every account's opening of that id (the server walks its subject index, account by account). Not for
   * customers' requests, which always name their account.
   */
  async accountOf(taskId: number): Promise<string | undefined> {
    const lastOf = () => this.jsm.direct.getLastMessagesFor(STREAMS.events.name, { multi_last: [taskOpeningFilter("*", taskId)] });
    for await (const msg of directMessages(lastOf)) return accountOfSubject(msg.subject);
    return undefined;
  }

  private async readAll(account: string, taskId: number): Promise<{ events: Array<{ event: TaskEvent; sequence: number }>; lastSequence: number }> {
    const lastOf = () => this.jsm.direct.getLastMessagesFor(STREAMS.events.name, { multi_last: [taskOpeningFilter(account, taskId), taskLaterSubjects(account, taskId)] });
    const lasts: Array<{ subject: string; event: TaskEvent; sequence: number }> = [];
    let opening: string | undefined;
    for await (const msg of directMessages(lastOf)) {
      if (isTaskOpeningSubject(msg.subject)) opening = msg.subject;
      for (const event of taskEventCodec.decode(msg.json())) lasts.push({ subject: msg.subject, event, sequence: msg.seq });
    }
    if (opening === undefined) return { events: [], lastSequence: 0 };
    const lastSequence = Math.max(0, ...lasts.filter(({ subject }) => subject !== opening).map(({ sequence }) => sequence));
    let events: Array<{ event: TaskEvent; sequence: number }> = lasts;
    // The `state` subject first (the one that holds several events), then any other that still leaves a gap.
    const state = taskEventsSubject(account, taskId, "state");
    for (const subjects of [[state], lasts.map(({ subject }) => subject).filter((subject) => subject !== opening && subject !== state)]) {
      if (isWhole(events)) break;
      const more = (await Promise.all(lasts.filter(({ subject }) => subjects.includes(subject)).map(({ subject, sequence }) => this.log.readThrough(subject, sequence)))).flat();
      const reread = new Set(more.map(({ sequence }) => sequence));
      events = [...events.filter(({ sequence }) => !reread.has(sequence)), ...more];
    }
    return { events: events.map(({ event, sequence }) => ({ event, sequence })).sort((a, b) => a.sequence - b.sequence), lastSequence };
  }
}

/** Versions are positions in a task's log: events hold all of it when there are as many as the highest version. */
const isWhole = (events: ReadonlyArray<{ event: TaskEvent }>): boolean => events.length >= Math.max(0, ...events.map(({ event }) => event.meta.version));
