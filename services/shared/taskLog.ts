import { JetStreamApiError, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { TaskEvent, taskSubject, type NewTaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { ConcurrencyError } from "./errors.ts";

const WRONG_LAST_SEQUENCE = 10071;

export interface TaskHistory {
  events: TaskEvent[];
  /** Stream sequence of the last event (0 when the task has none): the fence for the next append. */
  lastSequence: number;
}

/** Reads and appends one task's events on `tasks.<id>` in stream TASKS. */
export class TaskLog {
  constructor(private readonly js: JetStreamClient, private readonly jsm: JetStreamManager) {}

  async read(taskId: number): Promise<TaskHistory> {
    const subject = taskSubject(taskId);
    const last = await this.jsm.direct.getMessage(STREAMS.tasks.name, { last_by_subj: subject });
    if (!last) return { events: [], lastSequence: 0 };
    const consumer = await this.js.consumers.get(STREAMS.tasks.name, { filter_subjects: subject });
    const events: TaskEvent[] = [];
    try {
      for await (const msg of await consumer.consume({ max_messages: 256 })) {
        events.push(TaskEvent.parse(msg.json()));
        if (msg.seq >= last.seq) break;
      }
    } finally {
      await consumer.delete().catch(() => undefined);
    }
    return { events, lastSequence: last.seq };
  }

  /**
   * Appends with optimistic concurrency: the write succeeds only if the task's last event is still
   * `expectedLastSequence`. Two runners that both think they own a task cannot both write.
   * The msgID makes a retried publish (lost ack) land once. The server checks msgID before the
   * fence, so a duplicate may be another writer's event of the same version: callers must re-read.
   */
  async append(taskId: number, event: NewTaskEvent, version: number, expectedLastSequence: number): Promise<{ event: TaskEvent; sequence: number }> {
    const full = TaskEvent.parse({ ...event, meta: { schema: 1, taskId, version, at: new Date().toISOString() } });
    try {
      const ack = await this.js.publish(taskSubject(taskId), JSON.stringify(full), {
        msgID: `task-${taskId}-v${version}`,
        expect: { lastSubjectSequence: expectedLastSequence },
      });
      if (ack.duplicate) throw new ConcurrencyError(`task ${taskId} already has an event version ${version}`);
      return { event: full, sequence: ack.seq };
    } catch (error) {
      if (error instanceof ConcurrencyError) throw error;
      if (error instanceof JetStreamApiError && error.code === WRONG_LAST_SEQUENCE) {
        throw new ConcurrencyError(`task ${taskId} changed under us (expected last sequence ${expectedLastSequence})`);
      }
      throw error;
    }
  }
}
