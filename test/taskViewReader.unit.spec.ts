import type { KV, KvEntry } from "@nats-io/kv";
import { describe, expect, it } from "vitest";
import type { NewTaskEvent, TaskEvent, TaskView } from "../contracts/videoTask.ts";
import type { TaskHistory } from "../services/shared/taskLog.ts";
import { TaskViewReader } from "../services/edge/video/taskViewReader.ts";
import { evolveTaskView } from "../services/tasks/taskView.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";

const at = (n: number) => `2030-01-01T00:00:0${n}.000Z`;
function lifeOf(taskId: number): TaskEvent[] {
  const list: NewTaskEvent[] = [
    { type: "TaskSubmitted", data: { account: "acme", job, ignoredFields: [], deadlineAt: at(9) } },
    { type: "UpstreamAccepted", data: { providerTaskId: `p-${taskId}` } },
    { type: "GenerationStarted", data: {} },
    { type: "GenerationSucceeded", data: { video: { object: `v-${taskId}.mp4`, bytes: 5, contentType: "video/mp4" }, durationSeconds: 5, resolution: "1280*720", totalTokens: 108_900 } },
    { type: "VideoDeleted", data: { objects: [`v-${taskId}.mp4`] } },
  ];
  return list.map((event, index) => ({ ...event, meta: { schema: 1, taskId, version: index + 1, at: at(index) } }) as TaskEvent);
}
const viewAfter = (events: TaskEvent[]) => events.reduce<TaskView | null>(evolveTaskView, null);

/** The task log and the bucket as NATS would answer them, each read resolving only when the test says so. */
function world() {
  const log = new Map<number, TaskEvent[]>();
  const bucket = new Map<number, TaskView>();
  const reads = { log: 0, bucket: 0 };
  let hold: Promise<void> | undefined;
  const taskLog = {
    read: async (_account: string, taskId: number): Promise<TaskHistory> => {
      reads.log++;
      const events = [...(log.get(taskId) ?? [])];
      await hold;
      return { events, lastSequence: events.length };
    },
  };
  const kv = {
    get: async (key: string) => {
      reads.bucket++;
      const view = bucket.get(Number(key));
      return view ? ({ operation: "PUT", json: () => view } as unknown as KvEntry) : null;
    },
  } as unknown as KV;
  return { log, bucket, reads, reader: new TaskViewReader(kv, taskLog), holdReads: (until: Promise<void>) => (hold = until) };
}

describe("the edge's task views, kept by its feed of the task log", () => {
  it("given the feed brought a task's events, when it is asked for, then it answers from memory, newest version", async () => {
    const { reader, reads } = world();
    for (const event of lifeOf(7).slice(0, 3)) reader.apply(event);
    expect(await reader.get("acme", 7)).toEqual(viewAfter(lifeOf(7).slice(0, 3)));
    expect(reads).toEqual({ log: 0, bucket: 0 });
  });

  it("given a task not in memory and a bucket that is behind, when it is asked for, then its log answers (never the bucket's older running view)", async () => {
    const { reader, log, bucket, reads } = world();
    log.set(8, lifeOf(8).slice(0, 4));
    bucket.set(8, viewAfter(lifeOf(8).slice(0, 3)) as TaskView);
    expect((await reader.get("acme", 8))?.status).toBe("success");
    expect(reads.log).toBe(1);
  });

  it("given a final task in the bucket, when it is asked for, then the bucket answers it alone", async () => {
    const { reader, bucket, reads } = world();
    bucket.set(9, viewAfter(lifeOf(9).slice(0, 4)) as TaskView);
    expect((await reader.get("acme", 9))?.status).toBe("success");
    expect(reads).toEqual({ log: 0, bucket: 1 });
  });

  it("when the feed brings events while the task is being read, then they are folded in after the read", async () => {
    const { reader, log, holdReads } = world();
    log.set(10, lifeOf(10).slice(0, 2));
    let release = () => {};
    holdReads(new Promise<void>((resolve) => (release = resolve)));
    const answer = reader.get("acme", 10);
    for (const event of lifeOf(10).slice(2, 4)) reader.apply(event);
    release();
    expect(await answer).toEqual(viewAfter(lifeOf(10).slice(0, 4)));
    expect(await reader.get("acme", 10)).toEqual(viewAfter(lifeOf(10).slice(0, 4)));
  });

  it("when the feed brings an event after a gap (the view read was behind), then the task is read again next time", async () => {
    const { reader, log, bucket } = world();
    bucket.set(11, viewAfter(lifeOf(11).slice(0, 4)) as TaskView);
    await reader.get("acme", 11);
    // A later event than the next one: something passed the feed while the task was not in memory.
    const [, , , , deleted] = lifeOf(11);
    reader.apply({ ...deleted, meta: { ...deleted?.meta, version: 6 } } as TaskEvent);
    log.set(11, lifeOf(11));
    expect(await reader.get("acme", 11)).toEqual(viewAfter(lifeOf(11)));
  });

  it("while the feed is not running (a reconnect), every question goes to NATS; once it runs again from where it stopped, memory answers", async () => {
    const { reader, log, reads } = world();
    for (const event of lifeOf(12).slice(0, 2)) reader.apply(event);
    reader.setFed(false);
    log.set(12, lifeOf(12).slice(0, 3));
    expect((await reader.get("acme", 12))?.status).toBe("running");
    expect((await reader.get("acme", 12))?.status).toBe("running");
    expect(reads.log).toBe(2);
    reader.setFed(true);
    for (const event of lifeOf(12).slice(2, 4)) reader.apply(event);
    expect((await reader.get("acme", 12))?.status).toBe("success");
    expect(reads.log).toBe(2);
  });

  it("when the feed brings events while it is behind (catching up after a reopen), then memory holds them and answers current once the feed is", async () => {
    const { reader, log, reads } = world();
    for (const event of lifeOf(13).slice(0, 2)) reader.apply(event);
    reader.setFed(false);
    for (const event of lifeOf(13).slice(2, 4)) reader.apply(event);
    log.set(13, lifeOf(13).slice(0, 4));
    expect((await reader.get("acme", 13))?.status).toBe("success");
    expect(reads.log).toBe(1);
    reader.setFed(true);
    expect((await reader.get("acme", 13))?.status).toBe("success");
    expect(reads.log).toBe(1);
  });

  it("given a task created on this edge, when the feed brings its acceptance before the write is answered, then it is answered from memory with both", async () => {
    const { reader, reads } = world();
    const [opening, accepted] = lifeOf(12) as [TaskEvent, TaskEvent];
    reader.creating(12);
    // The feed reads no openings here: only the acceptance comes, before the create's await chain resumes.
    reader.apply(accepted);
    reader.created(opening);
    expect(await reader.get("acme", 12)).toEqual(viewAfter([opening, accepted]));
    expect(reads).toEqual({ log: 0, bucket: 0 });
  });

  it("given a create that wrote no opening of its own, then nothing of it stays in memory: the task is read when asked for", async () => {
    const { reader, log, reads } = world();
    const life = lifeOf(13);
    reader.creating(13);
    reader.notCreated(13);
    log.set(13, life.slice(0, 2));
    reader.apply(life[2] as TaskEvent);
    expect(await reader.get("acme", 13)).toEqual(viewAfter(life.slice(0, 2)));
    expect(reads.log).toBe(1);
  });

  it("given a feed catching up and a read of a task under way, when the feed brings the task's next event meanwhile, then memory has it once the feed is current", async () => {
    const { reader, log, holdReads } = world();
    // The feed holds the task as running; then it falls behind (its server restarted) and catches up.
    for (const event of lifeOf(9).slice(0, 3)) reader.apply(event);
    reader.setFed(false);
    log.set(9, lifeOf(9).slice(0, 3));
    let release = () => {};
    holdReads(new Promise<void>((resolve) => (release = resolve)));
    // A poll while the feed is behind reads the log; the success comes on the feed before that read answers.
    const polled = reader.get("acme", 9);
    reader.apply(lifeOf(9)[3] as TaskEvent);
    release();
    expect((await polled)?.status).toBe("success");
    reader.setFed(true);
    expect(reader.peek(9)?.status).toBe("success");
  });
});
