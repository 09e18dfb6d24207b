import type { JetStreamManager } from "@nats-io/jetstream";
import { accountOpenings, type TaskView } from "../../contracts/videoTask.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";

/**
 * An account's task ids, read from the stream's own subject index: each task's opening is the one message on
 * `acct.<account>.money.<epoch>.task.<id>`, so the subjects of the account's openings are its task list, exact and
 * current from the moment a create is answered. One request (paged by the client for very large accounts),
 * answered from the server's index of subjects: no message is read, and no separate index is written per task.
 */
export async function accountTaskIds(jsm: JetStreamManager, account: string): Promise<number[]> {
  const { state } = await jsm.streams.info(STREAMS.events.name, { subjects_filter: accountOpenings(account) });
  return Object.keys(state.subjects ?? {}).map((subject) => Number(subject.slice(subject.lastIndexOf(".") + 1)));
}

/** A task's current view (the edge's TaskViewReader: memory, else the bucket or the task's log). */
export type ViewOf = (taskId: number) => TaskView | undefined | Promise<TaskView | undefined>;

/** Views read at once while a filtered list looks for matches: a view not in the edge's memory is a round trip. */
const FILTERED_READS = 32;

/**
 * An account's tasks, newest first (or oldest first with `ascending`), with ids below `before` and above
 * `after` and that `matches` (a filter on status or model) if given, at most `limit`, and whether more follow.
 */
export async function listAccountTasks(
  jsm: JetStreamManager,
  account: string,
  options: { limit: number; before?: number; after?: number; ascending?: boolean; matches?: (view: TaskView) => boolean },
  viewOf: ViewOf,
): Promise<{ views: TaskView[]; more: boolean }> {
  const ids = (await accountTaskIds(jsm, account))
    .filter((id) => (options.before === undefined || id < options.before) && (options.after === undefined || id > options.after))
    .sort((a, b) => (options.ascending ? a - b : b - a));
  const views: TaskView[] = [];
  for (let start = 0; start < ids.length; ) {
    // One more than the page needs tells whether more follow; a filter may skip some, so it reads ahead.
    const wanted = options.limit + 1 - views.length;
    const chunk = ids.slice(start, start + (options.matches === undefined ? wanted : Math.max(wanted, FILTERED_READS)));
    start += chunk.length;
    for (const view of await Promise.all(chunk.map(viewOf))) {
      if (!view || view.account !== account || (options.matches !== undefined && !options.matches(view))) continue;
      if (views.length === options.limit) return { views, more: true };
      views.push(view);
    }
  }
  return { views, more: false };
}
