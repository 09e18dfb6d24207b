import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { TaskEvent, taskSubject, type NewTaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { SubjectLog } from "./subjectLog.ts";
import { traceHeaders } from "./tracing/natsTraceHeaders.ts";

export interface TaskHistory {
  events: TaskEvent[];
  /** Stream sequence of the last event (0 when the task has none): the fence for the next append. */
  lastSequence: number;
}

/** Reads and appends one task's events on `tasks.<id>` in stream TASKS. */
export class TaskLog {
  private readonly log: SubjectLog<TaskEvent>;

  constructor(js: JetStreamClient, jsm: JetStreamManager) {
    this.log = new SubjectLog(js, jsm, STREAMS.tasks.name, (raw) => TaskEvent.parse(raw));
  }

  /** The task's events with their stream sequences (the ids clients resume event streams from). */
  async history(taskId: number): Promise<Array<{ event: TaskEvent; sequence: number }>> {
    return (await this.log.read(taskSubject(taskId))).events;
  }

  async read(taskId: number): Promise<TaskHistory> {
    const { events, lastSequence } = await this.log.read(taskSubject(taskId));
    return { events: events.map(({ event }) => event), lastSequence };
  }

  /** Appends `event` as version `version` of the task, fenced on `expectedLastSequence` (see SubjectLog.append). */
  async append(taskId: number, event: NewTaskEvent, version: number, expectedLastSequence: number): Promise<{ event: TaskEvent; sequence: number }> {
    // Built from typed parts: no parse needed on the way out (events are parsed where they are read back).
    const full = { ...event, meta: { schema: 1, taskId, version, at: new Date().toISOString() } } as TaskEvent;
    // The event carries the writer's trace (W3C headers): reactors on the log (settlement) continue it.
    const sequence = await this.log.append(taskSubject(taskId), full, `task-${taskId}-v${version}`, expectedLastSequence, traceHeaders());
    return { event: full, sequence };
  }
}
