import type { JetStreamClient, JetStreamManager, JsMsg } from "@nats-io/jetstream";
import { laterTaskEventsSubject, TaskEvent, taskSubject, type NewTaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { singleEventCodec, SubjectLog } from "./subjectLog.ts";
import { traceHeaders } from "./tracing/natsTraceHeaders.ts";

/** Task log messages hold one event each. */
export const taskEventCodec = singleEventCodec((raw) => TaskEvent.parse(raw));

/** A task event as the reactors on the whole log get it: decoded once, with its stream sequence and message (headers). */
export interface TaskLogEntry {
  event: TaskEvent;
  seq: number;
  msg: JsMsg;
}

export interface TaskHistory {
  events: TaskEvent[];
  /**
   * Stream sequence of the task's last later event (0 when it has none yet): the fence for the next append.
   * The first event never needs a fence after it is written: only later events follow it.
   */
  lastSequence: number;
}

/**
 * Reads and appends one task's events in stream TASKS. The first event (TaskSubmitted, appended by the
 * edge) is on `tasks.<id>`, where runners find new tasks; every later one is on `tasks.<id>.next`. Both
 * subjects are literal, so a read is two indexed direct gets, never a scan (a wildcard read scanned: 6 ms
 * at 200k messages against 0.2 ms). A task created by an older reelay has early events on `tasks.<id>`
 * too; its later ones come after them in stream order, so the merge below reads both kinds alike.
 */
export class TaskLog {
  private readonly log: SubjectLog<TaskEvent>;

  constructor(js: JetStreamClient, jsm: JetStreamManager) {
    this.log = new SubjectLog(js, jsm, STREAMS.tasks.name, taskEventCodec);
  }

  /** The task's events with their stream sequences (the ids clients resume event streams from). */
  async history(taskId: number): Promise<Array<{ event: TaskEvent; sequence: number }>> {
    return (await this.readBoth(taskId)).events;
  }

  async read(taskId: number): Promise<TaskHistory> {
    const { events, lastSequence } = await this.readBoth(taskId);
    return { events: events.map(({ event }) => event), lastSequence };
  }

  /** The task's first event (TaskSubmitted), or undefined for a task that never came to be. */
  async first(taskId: number): Promise<TaskEvent | undefined> {
    return (await this.log.first(taskSubject(taskId)))?.event;
  }

  /** Appends the task's first event (version 1); refused (ConcurrencyError) when the task already has one. */
  async appendFirst(taskId: number, event: NewTaskEvent): Promise<{ event: TaskEvent; sequence: number }> {
    return this.write(taskSubject(taskId), taskId, event, 1, 0);
  }

  /** Appends `event` as version `version` of the task, fenced on `expectedLastSequence` (see TaskHistory). */
  async append(taskId: number, event: NewTaskEvent, version: number, expectedLastSequence: number): Promise<{ event: TaskEvent; sequence: number }> {
    return this.write(laterTaskEventsSubject(taskId), taskId, event, version, expectedLastSequence);
  }

  private async write(subject: string, taskId: number, event: NewTaskEvent, version: number, expectedLastSequence: number) {
    // Built from typed parts: no parse needed on the way out (events are parsed where they are read back).
    const full = { ...event, meta: { schema: 1, taskId, version, at: new Date().toISOString() } } as TaskEvent;
    // The event carries the writer's trace (W3C headers): reactors on the log (settlement) continue it.
    const sequence = await this.log.append(subject, [full], `task-${taskId}-v${version}`, expectedLastSequence, traceHeaders());
    return { event: full, sequence };
  }

  private async readBoth(taskId: number) {
    const [first, later] = await Promise.all([this.log.read(taskSubject(taskId)), this.log.read(laterTaskEventsSubject(taskId))]);
    return { events: [...first.events, ...later.events], lastSequence: later.lastSequence };
  }
}
