import { TASK_REACTOR_SUBJECTS, TaskView, type TaskEvent } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import type { Projection } from "../shared/projection.ts";
import { taskEventCodec } from "../shared/taskLog.ts";
import { evolveTaskViewForReactors, isFinalView, taskViewKey } from "./taskView.ts";

/**
 * The task views in `task_views`: only final ones are written. A running task's view changes a few times in
 * seconds and every reader folds it from the task's log or has it from its feed (the edge's TaskViewReader
 * reads the bucket for final views only), so writing each step cost messages and no reader used them.
 */
export const taskViewProjection: Projection<TaskEvent, TaskView> = {
  name: "task views",
  stream: STREAMS.events.name,
  // The reactors' part of the log: the upstream's id comes with the event after its acceptance.
  subjects: TASK_REACTOR_SUBJECTS,
  decode: taskEventCodec.decode,
  keyOf: (event) => taskViewKey(event.meta.taskId),
  startsDocument: (event) => event.type === "TaskSubmitted",
  evolve: evolveTaskViewForReactors,
  docSchema: TaskView,
  persists: isFinalView,
  settled: isFinalView,
};
